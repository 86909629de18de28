from __future__ import annotations

import ipaddress

import pytest

from external_query_service.models import ProviderType
from external_query_service.net._policy import ip_allowed
from external_query_service.net._sites import (
    check_origin,
    domain_matches,
    ip_literal,
    registrable_domain,
    source_allowed,
    url_host,
)
from external_query_service.settings import NetworkSettings, SourceSettings

OPEN = SourceSettings()


def origin(
    url: str,
    *,
    provider: ProviderType = "live_search",
    sources: SourceSettings = OPEN,
    networks: tuple[str, ...] = (),
) -> str:
    network = NetworkSettings.model_validate({"allowed_networks": list(networks)})
    return check_origin(url, provider_type=provider, sources=sources, network=network)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("a.b.example.co.uk", "example.co.uk"),
        ("news.example.com", "example.com"),
        ("WWW.Example.COM.", "example.com"),
        ("news-a.test", "news-a.test"),
        ("www.news-a.test", "news-a.test"),
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("co.uk", "co.uk"),
    ],
)
def test_registrable_domain_of_host(host: str, expected: str) -> None:
    assert registrable_domain(host) == expected


def test_unicode_and_punycode_spellings_are_one_site() -> None:
    assert registrable_domain("www.新闻.中国") == "xn--efvy88h.xn--fiqs8s"
    assert registrable_domain("news.xn--efvy88h.xn--fiqs8s") == "xn--efvy88h.xn--fiqs8s"


def test_domain_matches_subdomains_but_not_lookalike_names() -> None:
    assert domain_matches("cdn.news.example.org", "example.org")
    assert domain_matches("example.org", "example.org")
    assert not domain_matches("notexample.org", "example.org")
    assert not domain_matches("example.org", "")


def test_url_host_is_lower_case_without_port_and_empty_when_missing() -> None:
    assert url_host("https://News.Example.COM:8443/a?b=1") == "news.example.com"
    assert url_host("mailto:someone") == ""


def test_legacy_ipv4_spellings_are_ip_literals() -> None:
    assert ip_literal("2130706433") == ipaddress.IPv4Address("127.0.0.1")
    assert ip_literal("0x7f.1") == ipaddress.IPv4Address("127.0.0.1")
    assert ip_literal("news-a.test") is None


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "10.1.2.3",
        "127.0.0.1",
        "224.0.0.1",
        "::ffff:127.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
        "fec0::1",
    ],
)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert not ip_allowed(ipaddress.ip_address(address))


def test_configured_network_admits_a_private_address() -> None:
    loopback = (ipaddress.ip_network("127.0.0.0/8"),)
    assert ip_allowed(ipaddress.ip_address("127.0.0.5"), loopback)
    assert ip_allowed(ipaddress.ip_address("::ffff:127.0.0.5"), loopback)
    assert ip_allowed(ipaddress.ip_address("93.184.216.34"))


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "javascript:alert(1)", "file:///etc/passwd", "http:///no-host"]
)
def test_non_http_urls_fail_with_bad_scheme(url: str) -> None:
    assert origin(url) == "bad_scheme"


def test_subdomain_of_a_denied_domain_is_refused() -> None:
    sources = SourceSettings(deny_domains=("example.org",))
    assert origin("https://news.example.org/a", sources=sources) == "denied_domain"
    assert origin("https://example.com/a", sources=sources) == "ok"


def test_host_outside_a_non_empty_allow_list_is_refused() -> None:
    sources = SourceSettings(allow_domains=("news-a.test",))
    assert origin("http://www.news-a.test/a", sources=sources) == "ok"
    assert origin("http://news-b.test/a", sources=sources) == "not_allowed_domain"


def test_deny_list_wins_over_allow_list() -> None:
    sources = SourceSettings(allow_domains=("example.org",), deny_domains=("bad.example.org",))
    assert origin("https://bad.example.org/", sources=sources) == "denied_domain"


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/",
        "http://2130706433/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
def test_private_ip_literals_fail_with_private_address(url: str) -> None:
    assert origin(url) == "private_address"


def test_allowed_network_lets_a_loopback_literal_through() -> None:
    assert origin("http://127.0.0.1:8080/page", networks=("127.0.0.0/8",)) == "ok"


def test_trusted_endpoint_skips_lists_and_address_policy_but_not_the_scheme() -> None:
    sources = SourceSettings(allow_domains=("news-a.test",), deny_domains=("127.0.0.1",))
    assert origin("http://127.0.0.1:9000/v1/forecast", provider="fact_api", sources=sources) == "ok"
    assert origin("ftp://127.0.0.1/v1", provider="fact_api", sources=sources) == "bad_scheme"


def test_document_adapters_vouch_only_for_local_document_references() -> None:
    assert origin("docs://docs/guide.md", provider="doc_search") == "ok"
    assert origin("https://news-a.test/x", provider="doc_search") == "bad_scheme"
    assert origin("docs://docs/guide.md") == "bad_scheme"


def test_source_allowed_applies_only_the_lists() -> None:
    sources = SourceSettings(deny_domains=("example.org",))
    assert not source_allowed("www.example.org", sources)
    assert source_allowed("10.0.0.1", sources)


def test_registrable_domains_agree_with_the_publicsuffixlist_package_on_every_rule() -> None:
    import publicsuffixlist

    from external_query_service.net._policy import normalize_host
    from external_query_service.net._sites import _suffix_rules, registrable_domain

    reference = publicsuffixlist.PublicSuffixList()
    hosts = ["example.com", "a.b.example.co.uk", "x.unknown-tld-here", "www.公司.cn"]
    for rule in sorted(_suffix_rules().rules):
        name = rule.lstrip("!").replace("*", "wild")
        hosts += [name, f"site.{name}", f"a.site.{name}"]
    checked = 0
    for given in hosts:
        host = normalize_host(given)
        if "." not in host:
            continue
        expected = reference.privatesuffix(host) or host
        assert registrable_domain(given) == expected, given
        checked += 1
    assert checked > 20000
