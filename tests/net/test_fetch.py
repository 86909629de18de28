"""The safe fetcher and trusted endpoints against a real loopback server."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import itertools
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from external_query_service.errors import (
    BlockedDestination,
    ContentTooLarge,
    FetchDeadlineExceeded,
    FetchError,
    TooManyRedirects,
    UnsafeURL,
    UnsupportedContent,
    UpstreamStatus,
)
from external_query_service.net import _fetch as fetch_module
from external_query_service.net._body import DECODE_CHUNK
from external_query_service.net._breaker import BREAKER_HOSTS, CircuitBreaker
from external_query_service.net._fetch import (
    ApiResponse,
    FetchedPage,
    HttpRuntime,
    SafeFetcher,
    TrustedEndpoint,
    check_url,
)
from external_query_service.settings import NetworkSettings
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.testing.server import RecordedRequest, json_reply
from tests.support.world import closed_port


@pytest.fixture
def loopback(shared_loopback: LoopbackServer) -> LoopbackServer:
    """This module's tests share one server (see conftest)."""
    return shared_loopback


CAP = 1_000_000


def site_network(**overrides: Any) -> NetworkSettings:
    """Loopback admitted, two site names on it, small caps so the tests stay fast."""
    values: dict[str, Any] = {
        "allowed_networks": ["127.0.0.1/32"],
        "resolve": {"site-a.test": "127.0.0.1", "site-b.test": "127.0.0.1"},
        "timeout_s": 5.0,
        "max_page_bytes": CAP,
    }
    values.update(overrides)
    return NetworkSettings(**values)


def site_url(server: LoopbackServer, path: str, host: str = "site-a.test") -> str:
    return f"http://{host}:{server.port}{path}"


def run_fetch(network: NetworkSettings, url: str) -> FetchedPage:
    async def go() -> FetchedPage:
        fetcher = SafeFetcher(network)
        try:
            return await fetcher.fetch(url)
        finally:
            await fetcher.aclose()

    return asyncio.run(go())


def run_get_json(
    base_url: str, path: str, params: dict[str, str | int] | None = None
) -> ApiResponse:
    async def go() -> ApiResponse:
        endpoint = TrustedEndpoint(base_url, NetworkSettings(timeout_s=5.0))
        try:
            return await endpoint.get_json(path, params)
        finally:
            await endpoint.aclose()

    return asyncio.run(go())


# -- the URL gate ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://site-a.test/file",
        "file:///etc/passwd",
        "gopher://site-a.test/",
        "ws://site-a.test/",
        "wss://site-a.test/",
        "javascript:alert(1)",
        "http://trusted.example@127.0.0.1/",
        "http://127.0.0.1\\@evil.test/",
        "http://[::1",
        "http:///no-host",
        "http://exa mple.test/",
        "http://0177.0.0.1/",
        "/relative/only",
        "",
        "http://site-a.test/" + "a" * 2100,
    ],
)
def test_urls_outside_the_gate_are_refused_as_unsafe(url: str) -> None:
    with pytest.raises(UnsafeURL):
        check_url(url)


@settings(max_examples=200)
@given(st.text(max_size=80))
def test_the_gate_answers_any_text_with_a_url_or_unsafe_url(text: str) -> None:
    for candidate in (text, "http://" + text):
        with contextlib.suppress(UnsafeURL):
            check_url(candidate)


# -- pages -----------------------------------------------------------------------------


def test_a_page_is_fetched_with_the_stated_headers(loopback: LoopbackServer) -> None:
    loopback.route("/page", Reply(body="<p>你好</p>", content_type="text/html; charset=GBK"))
    network = site_network(user_agent="eqs-test/1.0 (+https://example.invalid/bot)")
    page = run_fetch(network, site_url(loopback, "/page"))
    (request,) = loopback.requests
    assert request.host == "site-a.test"
    assert request.headers["user-agent"] == "eqs-test/1.0 (+https://example.invalid/bot)"
    assert request.headers["accept"] == (
        "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8,application/pdf;q=0.7"
    )
    assert request.headers["accept-encoding"] == "gzip, deflate"
    assert request.headers["accept-language"] == "zh-CN,zh;q=0.9,en;q=0.8"
    assert page.status == 200
    assert page.content_type == "text/html"
    assert page.charset == "gbk"
    assert page.body == "<p>你好</p>".encode()
    assert page.raw_digest == "sha256:" + hashlib.sha256(page.body).hexdigest()
    assert page.final_url == page.url == site_url(loopback, "/page")
    assert page.redirects == ()


def test_a_gzip_page_is_decoded_and_digested_as_decoded_bytes(loopback: LoopbackServer) -> None:
    html = "<html><body>" + "证据 " * 5000 + "</body></html>"
    loopback.route(
        "/gz", Reply(body=gzip.compress(html.encode()), headers={"Content-Encoding": "gzip"})
    )
    page = run_fetch(site_network(), site_url(loopback, "/gz"))
    assert page.body == html.encode()
    assert page.raw_digest == "sha256:" + hashlib.sha256(html.encode()).hexdigest()


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS])
def test_deflate_pages_decode_with_and_without_the_zlib_wrapper(
    loopback: LoopbackServer, wbits: int
) -> None:
    compressor = zlib.compressobj(wbits=wbits)
    body = compressor.compress(b"plain deflate text " * 100) + compressor.flush()
    loopback.route("/deflate", Reply(body=body, headers={"Content-Encoding": "deflate"}))
    page = run_fetch(site_network(), site_url(loopback, "/deflate"))
    assert page.body == b"plain deflate text " * 100


def test_a_redirect_to_another_allowed_site_is_followed_and_recorded(
    loopback: LoopbackServer,
) -> None:
    target = site_url(loopback, "/final", host="site-b.test")
    loopback.route("/start", Reply(302, headers={"Location": target}), host="site-a.test")
    loopback.route("/final", Reply(body="arrived"), host="site-b.test")
    page = run_fetch(site_network(), site_url(loopback, "/start"))
    assert page.body == b"arrived"
    assert page.final_url == target
    assert page.redirects == (target,)
    assert [r.host for r in loopback.requests] == ["site-a.test", "site-b.test"]


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://192.168.0.1:8080/admin",
        "http://[fd00:ec2::254]/",
    ],
)
def test_a_redirect_into_the_internal_network_is_blocked_on_the_hop(
    loopback: LoopbackServer, location: str
) -> None:
    loopback.route("/go", Reply(302, headers={"Location": location}))
    with pytest.raises(BlockedDestination) as caught:
        run_fetch(site_network(), site_url(loopback, "/go"))
    assert "redirect hop" in caught.value.detail
    assert len(loopback.requests) == 1


@pytest.mark.parametrize(
    "location", ["file:///etc/passwd", "ftp://site-b.test/x", "gopher://site-b.test/", "ws://x/"]
)
def test_a_redirect_to_another_scheme_is_refused(loopback: LoopbackServer, location: str) -> None:
    loopback.route("/go", Reply(301, headers={"Location": location}))
    with pytest.raises(UnsafeURL):
        run_fetch(site_network(), site_url(loopback, "/go"))
    assert len(loopback.requests) == 1


def test_a_redirect_loop_stops_after_the_redirect_cap(loopback: LoopbackServer) -> None:
    loopback.route("/loop", Reply(302, headers={"Location": "/loop"}))
    with pytest.raises(TooManyRedirects):
        run_fetch(site_network(max_redirects=3), site_url(loopback, "/loop"))
    assert len(loopback.requests) == 4


def test_a_huge_declared_length_is_refused_before_the_body(loopback: LoopbackServer) -> None:
    loopback.route("/huge", Reply(body=b"x" * 100, content_length=10**10))
    with pytest.raises(ContentTooLarge) as caught:
        run_fetch(site_network(), site_url(loopback, "/huge"))
    assert "declared" in caught.value.detail


def test_an_endless_body_stops_at_the_cap(loopback: LoopbackServer) -> None:
    sent = itertools.count()

    def endless() -> Iterator[bytes]:
        for _ in sent:
            yield b"a" * 65536

    loopback.route("/endless", Reply(chunks=endless()))
    with pytest.raises(ContentTooLarge):
        run_fetch(site_network(), site_url(loopback, "/endless"))


class CountingDecompressor:
    """Wraps a zlib decompressor, counting what it hands out."""

    def __init__(self, inner: Any, log: list[int]) -> None:
        self._inner = inner
        self._log = log

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        out: bytes = self._inner.decompress(data, max_length)
        self._log.append(len(out))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_gzip_bomb_stops_at_the_cap_without_decoding_more(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    bomb = b"".join(compressor.compress(zeros) for _ in range(50)) + compressor.flush()
    loopback.route("/bomb", Reply(body=bomb, headers={"Content-Encoding": "gzip"}))
    produced: list[int] = []
    real = zlib.decompressobj
    monkeypatch.setattr(
        zlib, "decompressobj", lambda *a, **k: CountingDecompressor(real(*a, **k), produced)
    )
    with pytest.raises(ContentTooLarge):
        run_fetch(site_network(), site_url(loopback, "/bomb"))
    assert len(bomb) < CAP  # the raw bytes alone would pass the cap
    assert max(produced) <= DECODE_CHUNK
    assert CAP < sum(produced) <= CAP + DECODE_CHUNK


def test_a_slow_drip_runs_into_the_total_deadline(loopback: LoopbackServer) -> None:
    loopback.route("/drip", Reply(chunks=[b"a"] * 20, chunk_delay_s=0.2))
    with pytest.raises(FetchDeadlineExceeded):
        run_fetch(site_network(timeout_s=0.5), site_url(loopback, "/drip"))


def test_a_server_that_never_answers_runs_into_the_deadline(loopback: LoopbackServer) -> None:
    loopback.route("/silent", Reply(body="late", delay_s=1.0))
    with pytest.raises(FetchDeadlineExceeded):
        run_fetch(site_network(timeout_s=0.3), site_url(loopback, "/silent"))


def fetch_error(
    network: NetworkSettings, url: str, *, deadline_in_s: float | None = None
) -> FetchError:
    """The error a fetch of ``url`` ends with (optionally under a caller's deadline)."""

    async def go() -> FetchError:
        fetcher = SafeFetcher(network)
        deadline = None
        if deadline_in_s is not None:
            deadline = asyncio.get_running_loop().time() + deadline_in_s
        try:
            await fetcher.fetch(url, deadline=deadline)
        except FetchError as exc:
            return exc
        finally:
            await fetcher.aclose()
        raise AssertionError(f"{url} was fetched")

    return asyncio.run(go())


def test_a_deadline_that_cuts_a_started_body_says_the_response_had_begun(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/drip", Reply(chunks=[b"a"] * 20, chunk_delay_s=0.2))
    error = fetch_error(site_network(timeout_s=0.3), site_url(loopback, "/drip"))
    assert isinstance(error, FetchDeadlineExceeded)
    assert error.responded is True


def test_a_deadline_before_any_answer_says_nothing_had_begun(loopback: LoopbackServer) -> None:
    loopback.route("/silent", Reply(body="late", delay_s=1.0))
    error = fetch_error(site_network(timeout_s=0.3), site_url(loopback, "/silent"))
    assert isinstance(error, FetchDeadlineExceeded)
    assert error.responded is False


def test_a_redirect_answer_alone_does_not_count_as_the_response_beginning(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/hop", Reply(status=302, content_type=None, headers={"Location": "/silent"}))
    loopback.route("/silent", Reply(body="late", delay_s=1.0))
    error = fetch_error(site_network(timeout_s=0.3), site_url(loopback, "/hop"))
    assert isinstance(error, FetchDeadlineExceeded)
    assert error.responded is False


def test_the_callers_deadline_ends_a_fetch_before_timeout_s(loopback: LoopbackServer) -> None:
    loopback.route("/drip", Reply(chunks=[b"a"] * 50, chunk_delay_s=0.2))
    started = time.monotonic()
    error = fetch_error(site_network(timeout_s=5.0), site_url(loopback, "/drip"), deadline_in_s=0.4)
    assert time.monotonic() - started < 2.0
    assert isinstance(error, FetchDeadlineExceeded)
    assert "caller's deadline" in error.detail
    assert error.responded is True


def test_a_deadline_already_past_fetches_nothing(loopback: LoopbackServer) -> None:
    loopback.route("/page", Reply(body="<p>hello</p>"))
    error = fetch_error(site_network(), site_url(loopback, "/page"), deadline_in_s=-1.0)
    assert isinstance(error, FetchDeadlineExceeded)
    assert error.responded is False
    assert loopback.requests_to("/page") == []


def test_an_image_is_unsupported_content(loopback: LoopbackServer) -> None:
    loopback.route("/img", Reply(body=b"\x89PNG\r\n\x1a\n", content_type="image/png"))
    with pytest.raises(UnsupportedContent):
        run_fetch(site_network(), site_url(loopback, "/img"))


@pytest.mark.parametrize("coding", ["gzip, gzip", "br", "zstd", "compress"])
def test_stacked_or_unknown_content_codings_are_unsupported(
    loopback: LoopbackServer, coding: str
) -> None:
    loopback.route("/coded", Reply(body=gzip.compress(b"x"), headers={"Content-Encoding": coding}))
    with pytest.raises(UnsupportedContent):
        run_fetch(site_network(), site_url(loopback, "/coded"))


def test_a_corrupt_gzip_body_is_a_decoding_failure(loopback: LoopbackServer) -> None:
    loopback.route("/bad", Reply(body=b"not gzip at all", headers={"Content-Encoding": "gzip"}))
    with pytest.raises(FetchError) as caught:
        run_fetch(site_network(), site_url(loopback, "/bad"))
    assert caught.value.reason == "decoding_failed"


def test_a_missing_page_is_an_upstream_status(loopback: LoopbackServer) -> None:
    with pytest.raises(UpstreamStatus) as caught:
        run_fetch(site_network(), site_url(loopback, "/nothing-here"))
    assert caught.value.status == 404


def test_a_proxy_in_the_environment_is_ignored(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.route("/page", Reply(body="direct"))
    with LoopbackServer() as proxy:
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(name, proxy.url("/"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        page = run_fetch(site_network(), site_url(loopback, "/page"))
        assert page.body == b"direct"
        assert proxy.requests == []


def test_one_fetcher_works_across_consecutive_event_loops(loopback: LoopbackServer) -> None:
    loopback.route("/page", Reply(body="again"))
    fetcher = SafeFetcher(site_network())

    async def fetch_only() -> bytes:
        return (await fetcher.fetch(site_url(loopback, "/page"))).body

    async def fetch_and_close() -> bytes:
        try:
            return (await fetcher.fetch(site_url(loopback, "/page"))).body
        finally:
            await fetcher.aclose()

    # The first loop ends without aclose(): its client is forgotten, not reused.
    assert asyncio.run(fetch_only()) == b"again"
    assert asyncio.run(fetch_and_close()) == b"again"
    assert asyncio.run(fetch_and_close()) == b"again"
    assert len(loopback.requests) == 3


def counting_peak(server: LoopbackServer) -> list[int]:
    """Route ``/slow`` (0.1 s) on ``server``; the returned list's one item is the most
    requests it ever served at once."""
    lock = threading.Lock()
    active = [0]
    peak = [0]

    def slow(_request: RecordedRequest) -> Reply:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.1)
        with lock:
            active[0] -= 1
        return Reply(body="ok")

    server.route("/slow", slow)
    return peak


def fetch_all(network: NetworkSettings, urls: list[str]) -> None:
    async def go() -> None:
        fetcher = SafeFetcher(network)
        try:
            await asyncio.gather(*(fetcher.fetch(url) for url in urls))
        finally:
            await fetcher.aclose()

    asyncio.run(go())


@pytest.mark.parametrize(("overrides", "cap"), [({}, 4), ({"max_connections_per_host": 2}, 2)])
def test_one_host_gets_at_most_max_connections_per_host_fetches_at_once(
    loopback: LoopbackServer, overrides: dict[str, int], cap: int
) -> None:
    peak = counting_peak(loopback)
    urls = [site_url(loopback, f"/slow?n={n}") for n in range(3 * cap)]
    fetch_all(site_network(**overrides), urls)
    assert peak[0] == cap
    assert len(loopback.requests) == 3 * cap


def test_all_hosts_together_get_at_most_max_connections_fetches_at_once(
    loopback: LoopbackServer,
) -> None:
    peak = counting_peak(loopback)
    hosts = ("site-a.test", "site-b.test")
    urls = [site_url(loopback, f"/slow?n={n}", host=h) for n in range(4) for h in hosts]
    fetch_all(site_network(max_connections=3), urls)
    assert peak[0] == 3
    assert len(loopback.requests) == 8


def test_identical_fetches_in_flight_at_once_go_out_once(loopback: LoopbackServer) -> None:
    loopback.route("/slow", Reply(body="shared", delay_s=0.2))

    async def go() -> list[FetchedPage]:
        fetcher = SafeFetcher(site_network())
        try:
            return await asyncio.gather(
                *(fetcher.fetch(site_url(loopback, "/slow")) for _ in range(6))
            )
        finally:
            await fetcher.aclose()

    pages = asyncio.run(go())
    assert {page.body for page in pages} == {b"shared"}
    assert len(loopback.requests_to("/slow")) == 1


def test_cancelled_fetches_leave_no_connection_behind(loopback: LoopbackServer) -> None:
    loopback.route("/drip", Reply(chunks=[b"a"] * 10, chunk_delay_s=0.1))
    loopback.route("/page", Reply(body="after"))
    hosts = [f"site-{name}.test" for name in "abcdefghij"]
    network = site_network(resolve=dict.fromkeys(hosts, "127.0.0.1"))

    async def go() -> tuple[bytes, int]:
        fetcher = SafeFetcher(network)
        try:
            tasks = [
                asyncio.create_task(fetcher.fetch(site_url(loopback, "/drip", host=host)))
                for host in hosts * 2
            ]
            await asyncio.sleep(0.15)
            for task in tasks:
                task.cancel()
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            assert all(task.cancelled() for task in tasks)
            page = await fetcher.fetch(site_url(loopback, "/page"))
            pool = fetcher._loops.get().client._transport._pool  # type: ignore[attr-defined]
            return page.body, len(pool.connections)
        finally:
            await fetcher.aclose()

    body, open_connections = asyncio.run(go())
    assert body == b"after"
    assert open_connections == 0


# -- trusted endpoints -----------------------------------------------------------------


def test_a_trusted_endpoint_reaches_its_loopback_origin_without_allowed_networks(
    loopback: LoopbackServer,
) -> None:
    reply = json_reply({"base": "EUR", "rates": {"CNY": "7.8"}})
    loopback.route("/v1/latest", reply)
    result = run_get_json(loopback.url("/v1"), "latest", {"from": "EUR", "amount": 1})
    assert result.status == 200
    assert result.data == {"base": "EUR", "rates": {"CNY": "7.8"}}
    assert result.raw_digest == "sha256:" + hashlib.sha256(reply.body_bytes()).hexdigest()
    assert result.url == loopback.url("/v1/latest?from=EUR&amount=1")
    (request,) = loopback.requests
    assert request.query == {"from": ["EUR"], "amount": ["1"]}
    assert request.headers["accept"] == "application/json, text/html;q=0.9"
    assert request.headers["accept-language"] == "zh-CN,zh;q=0.9,en;q=0.8"


def test_the_same_origin_is_not_trusted_for_urls_from_outside(loopback: LoopbackServer) -> None:
    loopback.route("/v1/page", Reply(body="internal"))
    with pytest.raises(FetchError):
        run_fetch(NetworkSettings(), loopback.url("/v1/page"))
    assert loopback.requests == []


@pytest.mark.parametrize(
    "path",
    ["http://127.0.0.1:1/v1/latest", "http://evil.test/v1/latest", "https://127.0.0.1/v1/latest"],
)
def test_a_trusted_endpoint_refuses_another_origin(loopback: LoopbackServer, path: str) -> None:
    with pytest.raises(UnsafeURL):
        run_get_json(loopback.url("/v1"), path)
    assert loopback.requests == []


def test_a_trusted_endpoint_accepts_an_absolute_url_on_its_own_origin(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/search", json_reply({"results": []}))
    result = run_get_json(loopback.url("/"), loopback.url("/search"), {"q": "湛江 天气"})
    assert result.data == {"results": []}
    assert loopback.requests[0].query == {"q": ["湛江 天气"]}


@pytest.mark.parametrize(("status", "body"), [(500, "boom"), (302, ""), (429, "Too Many")])
def test_a_trusted_endpoint_reports_other_statuses_without_following(
    loopback: LoopbackServer, status: int, body: str
) -> None:
    headers = {"Location": "http://169.254.169.254/"} if status == 302 else {}
    loopback.route("/v1/x", Reply(status, body=body, content_type="text/plain", headers=headers))
    with pytest.raises(UpstreamStatus) as caught:
        run_get_json(loopback.url("/v1"), "x")
    assert caught.value.status == status
    assert len(loopback.requests) == 1


def test_a_trusted_endpoint_reports_invalid_json(loopback: LoopbackServer) -> None:
    loopback.route("/v1/x", Reply(body="<html>not json</html>"))
    with pytest.raises(FetchError) as caught:
        run_get_json(loopback.url("/v1"), "x")
    assert caught.value.reason == "invalid_json"


def test_a_trusted_endpoint_on_a_closed_port_fails_to_connect() -> None:
    port = closed_port()
    with pytest.raises(FetchError) as caught:
        run_get_json(f"http://127.0.0.1:{port}/v1", "x")
    assert caught.value.reason == "connect_failed"


def test_the_runtime_shares_one_endpoint_per_base_url(loopback: LoopbackServer) -> None:
    loopback.route("/api/ping", json_reply({"ok": True}))

    async def go() -> tuple[bool, object]:
        runtime = HttpRuntime(NetworkSettings(timeout_s=5.0))
        try:
            first = runtime.endpoint(loopback.url("/api"))
            same = runtime.endpoint(loopback.url("/api")) is first
            return same, (await first.get_json("ping")).data
        finally:
            await runtime.aclose()

    assert asyncio.run(go()) == (True, {"ok": True})
    assert fetch_module.HttpRuntime is HttpRuntime


# -- TLS -------------------------------------------------------------------------------


def test_tls_sends_the_url_host_as_sni_and_verifies_the_certificate(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a self-signed certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    command += ["-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1"]
    command += ["-subj", "/CN=site-a.test", "-addext", "subjectAltName=DNS:site-a.test"]
    subprocess.run(command, check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server_names: list[str | None] = []

    def record_name(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        server_names.append(name)

    context.sni_callback = record_name  # type: ignore[assignment]
    listener = socket.create_server(("127.0.0.1", 0))

    def handshake_once() -> None:
        conn, _ = listener.accept()
        with (
            contextlib.suppress(ssl.SSLError, OSError),
            context.wrap_socket(conn, server_side=True),
        ):
            pass

    thread = threading.Thread(target=handshake_once, daemon=True)
    thread.start()
    try:
        port = listener.getsockname()[1]
        # Connected to 127.0.0.1, yet SNI names the site; the self-signed chain is refused.
        with pytest.raises(FetchError) as caught:
            run_fetch(site_network(), f"https://site-a.test:{port}/")
    finally:
        thread.join(timeout=5)
        listener.close()
    assert server_names == ["site-a.test"]
    assert caught.value.reason == "connect_failed"
    assert "CERTIFICATE_VERIFY_FAILED" in caught.value.detail


def test_a_rate_limit_with_a_huge_retry_after_gives_up_at_once(loopback: LoopbackServer) -> None:
    loopback.route(
        "/busy",
        Reply(
            429,
            body="Too Many Requests",
            content_type="text/plain",
            headers={"Retry-After": "999999"},
        ),
    )
    with pytest.raises(UpstreamStatus) as caught:
        run_fetch(site_network(), site_url(loopback, "/busy"))
    assert caught.value.status == 429
    assert len(loopback.requests) == 1  # no retry, and nothing waits for Retry-After


def test_cookies_a_page_sets_are_never_sent_back(loopback: LoopbackServer) -> None:
    loopback.route("/set", Reply(body="first", headers={"Set-Cookie": "track=1; Path=/"}))
    loopback.route("/again", Reply(body="second"))

    async def go() -> None:
        fetcher = SafeFetcher(site_network())
        try:
            await fetcher.fetch(site_url(loopback, "/set"))
            await fetcher.fetch(site_url(loopback, "/again"))
        finally:
            await fetcher.aclose()

    asyncio.run(go())
    assert [r.path for r in loopback.requests] == ["/set", "/again"]
    assert "cookie" not in loopback.requests[1].headers


def test_a_redirect_hop_to_a_name_that_resolves_inside_is_blocked(
    loopback: LoopbackServer,
) -> None:
    # The hop's URL names a host, not an address: only the guard's own resolution, at
    # connect time, can tell it points inside.
    hop = f"http://intranet.test:{loopback.port}/secret"
    loopback.route("/go", Reply(302, headers={"Location": hop}), host="site-a.test")
    loopback.route("/secret", Reply(body="internal"), host="intranet.test")
    network = site_network(resolve={"site-a.test": "127.0.0.1", "intranet.test": "10.0.0.5"})
    with pytest.raises(BlockedDestination) as caught:
        run_fetch(network, site_url(loopback, "/go"))
    assert "redirect hop" in caught.value.detail
    assert [r.path for r in loopback.requests] == ["/go"]


def test_every_redirect_hop_is_resolved_and_checked_again(loopback: LoopbackServer) -> None:
    # Same host on both hops; its second answer points inside the network (rebinding
    # between hops). The first hop connected to the checked 127.0.0.1; the second is refused.
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.0.0.1"]

    loopback.route("/first", Reply(302, headers={"Location": "/second"}))
    loopback.route("/second", Reply(body="should not be read"))

    async def go() -> None:
        fetcher = SafeFetcher(site_network(resolve={}), resolver=rebinding)
        try:
            await fetcher.fetch(f"http://rebind.test:{loopback.port}/first")
        finally:
            await fetcher.aclose()

    with pytest.raises(BlockedDestination):
        asyncio.run(go())
    assert calls == ["rebind.test", "rebind.test"]
    assert [r.path for r in loopback.requests] == ["/first"]


# -- the circuit breaker: a host that keeps failing is left alone for a while -----------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_host_that_keeps_failing_is_left_alone_until_a_probe_after_the_cooldown(
    loopback: LoopbackServer,
) -> None:
    state = {"status": 503}

    def flaky(_request: RecordedRequest) -> Reply:
        return Reply(state["status"], body="busy" if state["status"] != 200 else "back")

    loopback.route("/flaky", flaky)
    clock = FakeClock()
    breaker = CircuitBreaker(threshold=5, cooldown_s=30.0, clock=clock)
    url = site_url(loopback, "/flaky")

    async def attempt(fetcher: SafeFetcher) -> str:
        try:
            return (await fetcher.fetch(url)).body.decode()
        except FetchError as exc:
            return exc.reason

    async def go() -> list[str]:
        fetcher = SafeFetcher(site_network(), breaker=breaker)
        outcomes = []
        try:
            for _ in range(7):
                outcomes.append(await attempt(fetcher))
            clock.now += 29.0
            outcomes.append(await attempt(fetcher))  # still cooling down
            clock.now += 2.0
            outcomes.append(await attempt(fetcher))  # the half-open probe fails: open again
            outcomes.append(await attempt(fetcher))
            clock.now += 31.0
            state["status"] = 200
            outcomes.append(await attempt(fetcher))  # the probe succeeds: closed
            outcomes.append(await attempt(fetcher))
        finally:
            await fetcher.aclose()
        return outcomes

    outcomes = asyncio.run(go())
    assert outcomes == [
        *["upstream_status"] * 5,
        "circuit_open",
        "circuit_open",
        "circuit_open",
        "upstream_status",
        "circuit_open",
        "back",
        "back",
    ]
    assert len(loopback.requests_to("/flaky")) == 8  # 5 failures, 2 probes, 1 after closing
    assert not breaker.is_open("site-a.test")


def test_the_breaker_remembers_at_most_its_bound_of_failed_hosts() -> None:
    # Hostile search results name ever new hosts that fail once and are never asked again.
    breaker = CircuitBreaker(threshold=2, clock=FakeClock())
    for n in range(BREAKER_HOSTS + 5_000):
        with pytest.raises(FetchError), breaker.guard(f"gone-{n}.test", f"http://gone-{n}.test/"):
            raise FetchError(f"http://gone-{n}.test/", "refused", reason="connect_failed")
    assert breaker.remembered() == BREAKER_HOSTS
    for _ in range(2):  # a forgotten host counts afresh, and opens again
        with pytest.raises(FetchError), breaker.guard("gone-1.test", "http://gone-1.test/"):
            raise FetchError("http://gone-1.test/", "refused", reason="connect_failed")
    assert breaker.is_open("gone-1.test")
    assert breaker.remembered() == BREAKER_HOSTS


def test_answers_and_policy_refusals_do_not_open_the_circuit(loopback: LoopbackServer) -> None:
    loopback.route("/missing", Reply(404, body="no"))
    breaker = CircuitBreaker(threshold=2, clock=FakeClock())

    async def go() -> None:
        fetcher = SafeFetcher(site_network(), breaker=breaker)
        try:
            for _ in range(3):
                with pytest.raises(UpstreamStatus):
                    await fetcher.fetch(site_url(loopback, "/missing"))
                with pytest.raises(BlockedDestination):
                    await fetcher.fetch("http://169.254.169.254/latest/meta-data/")
        finally:
            await fetcher.aclose()

    asyncio.run(go())
    assert not breaker.is_open("site-a.test")
    assert not breaker.is_open("169.254.169.254")
    assert len(loopback.requests_to("/missing")) == 3


def test_an_unreachable_endpoint_fails_fast_once_its_circuit_opens() -> None:
    port = closed_port()
    breaker = CircuitBreaker(threshold=2, clock=FakeClock())

    async def go() -> list[str]:
        endpoint = TrustedEndpoint(
            f"http://127.0.0.1:{port}/v1", NetworkSettings(timeout_s=5.0), breaker=breaker
        )
        reasons = []
        try:
            for _ in range(3):
                try:
                    await endpoint.get_json("latest")
                except FetchError as exc:
                    reasons.append(exc.reason)
        finally:
            await endpoint.aclose()
        return reasons

    assert asyncio.run(go()) == ["connect_failed", "connect_failed", "circuit_open"]
