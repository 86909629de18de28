"""The address policy: ``ip_allowed`` and the guarded backend, alone and wired into httpx."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable

import httpcore
import pytest
from hypothesis import given
from hypothesis import strategies as st

from external_query_service.errors import BlockedDestination, FetchError, UnsafeURL
from external_query_service.net._backend import GuardedBackend
from external_query_service.net._fetch import FetchedPage, SafeFetcher
from external_query_service.net._policy import ip_allowed
from external_query_service.settings import NetworkSettings
from external_query_service.testing import LoopbackServer, Reply


@pytest.fixture
def loopback(shared_loopback: LoopbackServer) -> LoopbackServer:
    """This module's tests share one server (see conftest)."""
    return shared_loopback


REFUSED_ADDRESSES = [
    "127.0.0.1",
    "10.0.0.5",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "fd00:ec2::254",
    "::1",
    "::ffff:169.254.169.254",
    "::ffff:127.0.0.1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::a9fe:a9fe",
    "2002:a9fe:a9fe::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "::127.0.0.1",
    "100.64.0.1",
    "0.0.0.0",
    "0.1.2.3",
    "::",
    "224.0.0.1",
    "ff02::1",
    "255.255.255.255",
    "198.18.0.1",
    "fec0::1",
    "fe80::1",
    "240.0.0.1",
    "192.0.2.1",
    "not-an-address",
]


class SpyBackend(httpcore.AsyncNetworkBackend):
    """Records where the guard would connect; never opens a socket."""

    def __init__(self) -> None:
        self.connects: list[tuple[str, int]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append((host, port))
        return httpcore.AsyncMockStream([])


class ScriptedResolver:
    """Plays DNS: answers from a table, counting every call."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        script = self.answers[host]
        return script[min(len(self.calls) - 1, len(script) - 1)]


def run_fetch(network: NetworkSettings, url: str, **kwargs: object) -> FetchedPage:
    async def go() -> FetchedPage:
        fetcher = SafeFetcher(network, **kwargs)  # type: ignore[arg-type]
        try:
            return await fetcher.fetch(url)
        finally:
            await fetcher.aclose()

    return asyncio.run(go())


# -- ip_allowed ----------------------------------------------------------------------


@pytest.mark.parametrize("address", REFUSED_ADDRESSES)
def test_non_global_and_embedded_addresses_are_refused(address: str) -> None:
    assert ip_allowed(address) is False


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700:4700::1111", "1.1.1.1"])
def test_global_unicast_addresses_are_allowed(address: str) -> None:
    assert ip_allowed(address) is True


def test_an_allowed_network_admits_a_private_address_and_nothing_beside_it() -> None:
    allowed = [ipaddress.ip_network("127.0.0.1/32")]
    assert ip_allowed("127.0.0.1", allowed) is True
    assert ip_allowed("::ffff:127.0.0.1", allowed) is True
    assert ip_allowed("127.0.0.2", allowed) is False
    assert ip_allowed("::1", allowed) is False


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_an_ipv4_mapped_address_is_judged_as_the_ipv4_it_carries(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    assert ip_allowed(mapped) == ip_allowed(v4)


# -- the backend alone ---------------------------------------------------------------


def test_a_port_outside_the_web_ports_is_refused_before_any_resolution() -> None:
    resolver = ScriptedResolver({"mail.test": [["8.8.8.8"]]})
    spy = SpyBackend()
    backend = GuardedBackend(resolver=resolver, inner=spy)
    with pytest.raises(UnsafeURL, match="port 25"):
        asyncio.run(backend.connect_tcp("mail.test", 25))
    assert resolver.calls == []
    assert spy.connects == []


def test_a_host_with_one_private_answer_among_public_ones_is_refused_whole() -> None:
    resolver = ScriptedResolver({"mixed.test": [["8.8.8.8", "127.0.0.1"]]})
    spy = SpyBackend()
    backend = GuardedBackend(resolver=resolver, inner=spy)
    with pytest.raises(BlockedDestination):
        asyncio.run(backend.connect_tcp("mixed.test", 80))
    assert spy.connects == []


def test_a_public_host_is_connected_through_the_checked_address_literal() -> None:
    resolver = ScriptedResolver({"news.test": [["93.184.216.34", "2606:4700:4700::1111"]]})
    spy = SpyBackend()
    backend = GuardedBackend(resolver=resolver, inner=spy)
    asyncio.run(backend.connect_tcp("news.test", 443))
    assert spy.connects == [("93.184.216.34", 443)]
    assert resolver.calls == [("news.test", 443)]


def test_the_resolve_map_answers_before_the_resolver() -> None:
    resolver = ScriptedResolver({})
    spy = SpyBackend()
    backend = GuardedBackend(
        allowed_networks=[ipaddress.ip_network("127.0.0.1/32")],
        resolve={"site-a.test": "127.0.0.1"},
        resolver=resolver,
        inner=spy,
    )
    asyncio.run(backend.connect_tcp("Site-A.test.", 4321))
    assert spy.connects == [("127.0.0.1", 4321)]
    assert resolver.calls == []


def test_a_trusted_origin_skips_the_policy_but_only_at_its_own_port() -> None:
    spy = SpyBackend()
    backend = GuardedBackend(trusted_origins=[("127.0.0.1", 8888)], inner=spy)
    asyncio.run(backend.connect_tcp("127.0.0.1", 8888))
    assert spy.connects == [("127.0.0.1", 8888)]
    with pytest.raises(BlockedDestination):
        asyncio.run(backend.connect_tcp("127.0.0.1", 80))
    assert spy.connects == [("127.0.0.1", 8888)]


def test_a_failed_resolution_is_a_fetch_error_with_a_reason() -> None:
    async def failing(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    backend = GuardedBackend(resolver=failing, inner=SpyBackend())
    with pytest.raises(FetchError) as caught:
        asyncio.run(backend.connect_tcp("nowhere.test", 443))
    assert caught.value.reason == "resolve_failed"


def test_unix_sockets_are_always_refused() -> None:
    backend = GuardedBackend(inner=SpyBackend())
    with pytest.raises(UnsafeURL):
        asyncio.run(backend.connect_unix_socket("/var/run/docker.sock"))


# -- wired into the fetcher (fails if the private-pool wiring stops taking effect) ----


def test_default_policy_refuses_loopback_and_the_server_sees_nothing(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/", Reply(body="secret"))
    with pytest.raises(UnsafeURL):  # high port, no allowed networks: refused early
        run_fetch(NetworkSettings(), loopback.url("/"))
    unrelated = NetworkSettings(allowed_networks=["10.0.0.0/8"])
    with pytest.raises(BlockedDestination):
        run_fetch(unrelated, loopback.url("/"))
    assert loopback.requests == []


def test_an_allowed_network_and_resolve_entry_reach_the_named_site(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/page", Reply(body="<p>hello</p>"), host="site-a.test")
    network = NetworkSettings(
        allowed_networks=["127.0.0.1/32"], resolve={"site-a.test": "127.0.0.1"}
    )
    page = run_fetch(network, f"http://site-a.test:{loopback.port}/page")
    assert page.body == b"<p>hello</p>"
    assert page.connected_address == "127.0.0.1"
    assert [r.host for r in loopback.requests] == ["site-a.test"]


def test_a_mixed_answer_with_a_private_address_is_refused_before_connecting(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/", Reply(body="x"))
    resolver = ScriptedResolver({"mixed.test": [["127.0.0.1", "10.0.0.5"]]})
    network = NetworkSettings(allowed_networks=["127.0.0.1/32"])
    with pytest.raises(BlockedDestination):
        run_fetch(network, f"http://mixed.test:{loopback.port}/", resolver=resolver)
    assert loopback.requests == []


def test_each_connection_resolves_once_and_uses_that_answer(loopback: LoopbackServer) -> None:
    loopback.route("/", Reply(body="first answer wins"))
    # A rebinding resolver: the second lookup would point inside the network.
    resolver = ScriptedResolver({"rebind.test": [["127.0.0.1"], ["10.0.0.1"]]})
    network = NetworkSettings(allowed_networks=["127.0.0.1/32"])
    page = run_fetch(network, f"http://rebind.test:{loopback.port}/", resolver=resolver)
    assert page.body == b"first answer wins"
    assert page.connected_address == "127.0.0.1"
    assert resolver.calls == [("rebind.test", loopback.port)]


@pytest.mark.parametrize("host", ["2130706433", "0x7f.1", "017700000001", "127.1"])
def test_legacy_ipv4_notations_are_blocked_after_resolution(
    loopback: LoopbackServer, host: str
) -> None:
    loopback.route("/", Reply(body="x"))
    seen: list[list[str]] = []

    async def recording(name: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        seen.append(sorted({str(info[4][0]) for info in infos}))
        return seen[-1]

    network = NetworkSettings(allowed_networks=["127.0.0.2/32"])
    with pytest.raises(BlockedDestination):
        run_fetch(network, f"http://{host}:{loopback.port}/", resolver=recording)
    assert seen == [["127.0.0.1"]]
    assert loopback.requests == []


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/",
        "http://LOCALHOST./",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://169.254.169.254/latest/meta-data/",
        "https://[fd00:ec2::254]/",
    ],
)
def test_loopback_and_metadata_names_are_blocked_on_a_web_port(url: str) -> None:
    with pytest.raises(BlockedDestination):
        run_fetch(NetworkSettings(timeout_s=2), url)


def test_a_web_port_on_a_public_address_is_allowed_but_others_are_not() -> None:
    resolver = ScriptedResolver({"public.test": [["8.8.8.8"]]})
    spy = SpyBackend()
    backend = GuardedBackend(
        allowed_networks=[ipaddress.ip_network("127.0.0.1/32")], resolver=resolver, inner=spy
    )
    with pytest.raises(UnsafeURL, match="port 6379"):
        asyncio.run(backend.connect_tcp("public.test", 6379))
    asyncio.run(backend.connect_tcp("public.test", 8443))
    assert spy.connects == [("8.8.8.8", 8443)]


class RefusingFirstBackend(SpyBackend):
    """Refuses the first address it is asked to connect to, like a dead AAAA record."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append((host, port))
        if len(self.connects) == 1:
            raise httpcore.ConnectError("network unreachable")
        return httpcore.AsyncMockStream([])


def test_checked_addresses_are_tried_in_order_until_one_connects() -> None:
    resolver = ScriptedResolver({"dual.test": [["2606:4700:4700::1111", "93.184.216.34"]]})
    spy = RefusingFirstBackend()
    backend = GuardedBackend(resolver=resolver, inner=spy)
    asyncio.run(backend.connect_tcp("dual.test", 443))
    assert spy.connects == [("2606:4700:4700::1111", 443), ("93.184.216.34", 443)]
    assert resolver.calls == [("dual.test", 443)]


def test_a_resolve_override_is_honoured_and_still_judged_by_the_guard() -> None:
    # ``resolve`` replaces DNS, not the policy: a name mapped to a private address is
    # refused unless that address is inside allowed_networks.
    spy = SpyBackend()
    backend = GuardedBackend(resolve={"docs.test": "10.1.2.3"}, inner=spy)
    with pytest.raises(BlockedDestination):
        asyncio.run(backend.connect_tcp("docs.test", 443))
    admitted = GuardedBackend(
        allowed_networks=[ipaddress.ip_network("10.1.2.0/24")],
        resolve={"docs.test": "10.1.2.3"},
        inner=spy,
    )
    asyncio.run(admitted.connect_tcp("docs.test", 443))
    assert spy.connects == [("10.1.2.3", 443)]
