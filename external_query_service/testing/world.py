"""A live world: search engines, fact APIs and web pages on loopback, the guard left on.

A ``World`` serves HTTP exchanges by absolute URL. Plain ``http`` URLs go to one loopback
server, ``https`` URLs to a second one with a throwaway CA (``tls.py``); ``settings()``
points each origin (``host:port``) there through ``[network] connect_to`` and trusts the
CA through ``ca_bundle``, so URLs, sources and evidence ids stay exactly what was recorded.
Routes match on scheme, host and path; a route's own query is a subset the request must
carry (the most specific match wins), so ``?from=USD&to=CNY`` and ``?from=EUR&to=CNY``
are different answers on one path.

Built by hand (``route``, ``page``, ``results``, ``fault``...) or from a directory
(``open_world(dir)``, format in ``world_files.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl

import httpx

from ..adapters import frankfurter, open_meteo
from ..clock import Clock, fixed_clock, system_clock
from ..errors import InputError
from ..service import ExternalQueryService
from ..settings import Settings
from .content import searx_body
from .faults import BLOCKED_ADDRESS, ORIGIN_FAULTS, Fault, fault_reply
from .secrets import REDACTED
from .server import LoopbackServer, RecordedRequest, Reply, json_reply
from .tls import WorldCA
from .world_files import ApiEntry, PageEntry, SearchEntry, WorldSpec, load_world

__all__ = [
    "FORECAST",
    "FX",
    "GEO",
    "LOOPBACK",
    "SEARX",
    "World",
    "open_world",
]

LOOPBACK = "127.0.0.1"
#: Path prefixes of the hand-built fact APIs on the plain server (any host).
SEARX = "/searx"
GEO = "/geo/v1"
FORECAST = "/om/v1"
FX = "/fx/v1"
#: Where a world's searxng adapter lives when the world does not say.
DEFAULT_SEARX_URL = "https://searx.world.test"

_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Built-in adapters' default endpoints, written into a world's settings explicitly.
_DEFAULT_URLS: dict[str, dict[str, str]] = {
    "open_meteo": {
        "base_url": open_meteo.DEFAULT_BASE_URL,
        "geocoding_url": open_meteo.DEFAULT_GEOCODING_URL,
    },
    "frankfurter": {"base_url": frankfurter.DEFAULT_BASE_URL},
    "searxng": {"base_url": DEFAULT_SEARX_URL},
}
_URL_FIELDS = ("base_url", "geocoding_url")

Handler = Callable[[RecordedRequest], Reply]
Origin = tuple[str, int]


@dataclass(frozen=True)
class _Route:
    query: tuple[tuple[str, str], ...]
    handler: Handler


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # as in the Host header: ASCII, lower case
    port: int
    path: str  # percent-encoded, as the server sees it
    query: tuple[tuple[str, str], ...]


def _target(url: str) -> _Target:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InputError(f"not a URL: {url!r} ({exc})") from None
    if parsed.scheme not in _DEFAULT_PORTS or not parsed.raw_host:
        raise InputError(f"a world serves absolute http(s) URLs only: {url!r}")
    raw = parsed.raw_path.decode("ascii")
    path, _, query = raw.partition("?")
    return _Target(
        scheme=parsed.scheme,
        host=parsed.raw_host.decode("ascii").lower(),
        port=parsed.port or _DEFAULT_PORTS[parsed.scheme],
        path=path or "/",
        query=tuple(parse_qsl(query, keep_blank_values=True)),
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _origin_text(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def _matches(route: _Route, pairs: list[tuple[str, str]]) -> bool:
    remaining = list(pairs)
    for key, value in route.query:
        found = next(
            (i for i, (k, v) in enumerate(remaining) if k == key and value in (v, REDACTED)),
            None,
        )
        if found is None:
            if value == REDACTED:
                # A recorded credential: the replaying client, which has none, may omit it.
                continue
            return False
        del remaining[found]
    return True


def _delayed(reply: Reply, latency_ms: int) -> Reply:
    return dataclasses.replace(reply, delay_s=reply.delay_s + latency_ms / 1000)


class World:
    """Sites, search answers and fact APIs on loopback; ``settings()`` points a service here.

    ``World(server)`` uses a started ``LoopbackServer`` for plain http (the caller stops
    it); ``World()`` starts and owns one. ``close()`` (or leaving ``with``) stops what the
    world started. ``now`` is the world's fixed clock, if any.
    """

    def __init__(self, server: LoopbackServer | None = None, *, now: datetime | None = None):
        self._owned: list[LoopbackServer] = []
        if server is None:
            server = LoopbackServer().start()
            self._owned.append(server)
        self.server = server
        self.now = now
        self.name = "world"
        #: Host names served (each gets a ``resolve`` entry).
        self.sites: set[str] = set()
        #: Hand-built SearXNG answers at ``SEARX`` on the plain server, by query.
        self.search: dict[str, list[dict[str, Any]]] = {}
        self.default_results: list[dict[str, Any]] = []
        #: A loaded world's own adapters and settings sections.
        self.adapters: list[dict[str, Any]] = []
        self.sections: dict[str, dict[str, Any]] = {}
        #: The directory this world was loaded from (``install``), if any.
        self.spec: WorldSpec | None = None
        self._lock = threading.Lock()
        self._routes: dict[tuple[str, str, str], list[_Route]] = {}
        self._origins: dict[Origin, str] = {}
        self._origin_faults: dict[Origin, Fault] = {}
        self._tls_server: LoopbackServer | None = None
        self._ca_file: Path | None = None
        self._tmp: Path | None = None
        self._refusing: socket.socket | None = None
        self.server.route(f"{SEARX}/search", self._hand_search)
        self.server.route(f"{SEARX}/config", json_reply({"instance_name": "loopback"}))

    # -- routes by URL ----------------------------------------------------------------------
    def route(self, url: str, reply: Reply | Handler, *, latency_ms: int = 0) -> str:
        """Answer GETs of ``url`` with ``reply``; returns ``url``. The URL's query is the
        subset a request must carry (none: any query). A later route with the same query
        replaces an earlier one."""
        target = _target(url)
        handler = reply if callable(reply) else (lambda _r, fixed=reply: fixed)
        if latency_ms:
            inner = handler
            handler = lambda request: _delayed(inner(request), latency_ms)  # noqa: E731
        server = self._server_for(target.scheme)
        key = (target.scheme, target.host, target.path)
        with self._lock:
            routes = self._routes.get(key)
            if routes is None:
                routes = self._routes[key] = []
                server.route(target.path, self._dispatcher(key), host=target.host)
            routes[:] = [r for r in routes if r.query != target.query]
            routes.append(_Route(target.query, handler))
        self.claim(url)
        return url

    def claim(self, url: str) -> None:
        """Serve ``url``'s origin from this world (unknown paths answer 404), so requests
        to it never leave the machine."""
        target = _target(url)
        self._server_for(target.scheme)
        with self._lock:
            self._origins.setdefault((target.host, target.port), target.scheme)
            if not _is_ip(target.host):
                self.sites.add(target.host)

    def fault(self, url: str, fault: Fault, *, content_type: str | None = None) -> str:
        """Inject ``fault`` (``faults.py``): on ``url``'s route, or on its whole origin for
        ``refused`` and ``blocked``."""
        if fault in ORIGIN_FAULTS:
            target = _target(url)
            with self._lock:
                self._origin_faults[(target.host, target.port)] = fault
            return url
        return self.route(url, _fault_handler(fault, content_type))

    def _dispatcher(self, key: tuple[str, str, str]) -> Handler:
        def dispatch(request: RecordedRequest) -> Reply:
            pairs = parse_qsl(request.raw_query, keep_blank_values=True)
            with self._lock:
                routes = list(self._routes.get(key, ()))
            found = [route for route in routes if _matches(route, pairs)]
            if not found:
                return Reply(404, b"not in this world", "text/plain")
            best = max(found, key=lambda route: len(route.query))
            return best.handler(request)

        return dispatch

    # -- hand-built content (the style of the project's own end-to-end tests) ----------------
    def url(self, site: str, path: str) -> str:
        """``http://<site>:<port><path>`` on the plain server."""
        return f"http://{site}:{self.server.port}{path}"

    def page(
        self,
        site: str,
        path: str,
        body: str | bytes,
        *,
        content_type: str = "text/html; charset=utf-8",
        status: int = 200,
    ) -> str:
        """Serve ``body`` at ``http://<site>:<port><path>``; returns that URL."""
        return self.route(
            self.url(site, path), Reply(status=status, body=body, content_type=content_type)
        )

    def results(self, query: str, hits: list[dict[str, Any]]) -> None:
        """What the hand-built SearXNG (``searxng()``) answers for ``query``."""
        self.search[query] = hits

    def _hand_search(self, request: RecordedRequest) -> Reply:
        query = request.query.get("q", [""])[0]
        if not query:
            return json_reply({"error": "No query"}, status=400)
        return json_reply(searx_body(query, self.search.get(query, self.default_results)))

    def geocoding(self, handler: Handler) -> None:
        self.server.route(f"{GEO}/search", handler)

    def forecast(self, handler: Handler) -> None:
        self.server.route(f"{FORECAST}/forecast", handler)

    def fx(self, path: str, reply: Reply) -> None:
        self.server.route(f"{FX}/{path}", reply)

    def base(self, prefix: str) -> str:
        return f"http://{LOOPBACK}:{self.server.port}{prefix}"

    def searxng(self, adapter_id: str = "searx", *, base_url: str | None = None) -> dict[str, Any]:
        return {"kind": "searxng", "id": adapter_id, "base_url": base_url or self.base(SEARX)}

    def open_meteo(self) -> dict[str, Any]:
        return {
            "kind": "open_meteo",
            "id": "weather",
            "base_url": self.base(FORECAST),
            "geocoding_url": self.base(GEO),
        }

    def frankfurter(self) -> dict[str, Any]:
        return {"kind": "frankfurter", "id": "fx", "base_url": self.base(FX)}

    # -- a world from a directory -------------------------------------------------------------
    def install(self, spec: WorldSpec) -> None:
        """Serve everything ``spec`` holds and adopt its clock, adapters and settings."""
        manifest = spec.manifest
        self.spec = spec
        self.name = spec.name
        self.now = manifest.world.now if manifest.world.now is not None else self.now
        self.sections = {
            name: dict(getattr(manifest, name))
            for name in ("network", "sources", "verifier")
            if getattr(manifest, name)
        }
        self.adapters = [_with_default_urls(dict(adapter)) for adapter in manifest.adapters]
        for adapter in self.adapters:
            for field in _URL_FIELDS:
                if isinstance(adapter.get(field), str):
                    self.claim(adapter[field])
            if adapter.get("kind") == "searxng":
                base = str(adapter["base_url"]).rstrip("/")
                self.route(f"{base}/config", json_reply({"instance_name": spec.name}))
        for search in manifest.search:
            self._install_search(spec, search)
        exchanges: list[PageEntry | ApiEntry] = [*manifest.pages, *manifest.api]
        for entry in exchanges:
            self._install_exchange(spec, entry)

    def _install_search(self, spec: WorldSpec, entry: SearchEntry) -> None:
        engines = [
            adapter
            for adapter in self.adapters
            if adapter.get("kind") == "searxng" and entry.adapter in (None, adapter.get("id"))
        ]
        if not engines:
            raise InputError(f"{spec.root}: [[search]] names no searxng adapter of this world")
        body = spec.body(entry)
        if body is None:
            body = json.dumps(
                searx_body(entry.query or "", list(entry.results or ())), ensure_ascii=False
            ).encode("utf-8")
        for url in _result_urls(body):
            with contextlib.suppress(InputError):
                if not _is_ip(_target(url).host):
                    self.claim(url)
        for adapter in engines:
            base = str(adapter["base_url"]).rstrip("/")
            query = httpx.QueryParams({"q": entry.query}) if entry.query is not None else ""
            url = f"{base}/search" + (f"?{query}" if query else "")
            self._serve_entry(url, entry, body, "application/json")

    def _install_exchange(self, spec: WorldSpec, entry: PageEntry | ApiEntry) -> None:
        default = "text/html; charset=utf-8" if isinstance(entry, PageEntry) else "application/json"
        self._serve_entry(entry.url, entry, spec.body(entry), default, entry.redirect_to)

    def _serve_entry(
        self,
        url: str,
        entry: SearchEntry | PageEntry | ApiEntry,
        body: bytes | None,
        default_type: str,
        redirect_to: str | None = None,
    ) -> None:
        declared = getattr(entry, "content_type", None)
        content_type = default_type if declared is None else (declared or None)
        fault = entry.fault
        if fault in ORIGIN_FAULTS:
            self.claim(url)
            self.fault(url, fault)
            return
        if fault is not None:
            self.route(url, _fault_handler(fault, content_type), latency_ms=entry.latency_ms)
            return
        if redirect_to is not None:
            status = entry.status if 300 <= entry.status < 400 else 302
            reply = Reply(status=status, content_type=None, headers={"Location": redirect_to})
        else:
            reply = Reply(status=entry.status, body=body or b"", content_type=content_type)
        self.route(url, reply, latency_ms=entry.latency_ms)

    # -- settings ---------------------------------------------------------------------------
    @property
    def clock(self) -> Clock:
        """The world's fixed clock, or the system clock when it has none."""
        return fixed_clock(self.now) if self.now is not None else system_clock

    def connect_to(self) -> dict[str, str]:
        """``[network] connect_to`` for every origin this world serves or refuses."""
        table: dict[str, str] = {}
        with self._lock:
            origins = dict(self._origins)
            faults = dict(self._origin_faults)
        for (host, port), scheme in sorted(origins.items()):
            served = self._server_for(scheme).port
            if (host, port) != (LOOPBACK, served):
                table[_origin_text(host, port)] = f"{LOOPBACK}:{served}"
        for (host, port), fault in sorted(faults.items()):
            if fault == "refused":
                table[_origin_text(host, port)] = f"{LOOPBACK}:{self._refused_port()}"
            else:
                table[_origin_text(host, port)] = f"{BLOCKED_ADDRESS}:{port}"
        return table

    def settings(self, *adapters: Mapping[str, Any], **sections: Any) -> Settings:
        """Settings for a service in this world: the given adapters (default: the world's
        own), every world origin reached through ``connect_to`` on loopback, the world's CA
        trusted, the guard on (only 127.0.0.1 admitted). ``network=`` entries override."""
        chosen = [_with_default_urls(dict(adapter)) for adapter in adapters] or self.adapters
        for adapter in chosen:
            for field in _URL_FIELDS:
                value = adapter.get(field)
                if isinstance(value, str) and not _is_ip(_target(value).host):
                    self.claim(value)
        own = dict(self.sections.get("network", {}))
        network: dict[str, Any] = {
            "timeout_s": 5.0,
            "deadline_s": 10.0,
            **own,
            "allowed_networks": [f"{LOOPBACK}/32", *own.get("allowed_networks", [])],
            "resolve": {
                **dict.fromkeys(sorted(self.sites), LOOPBACK),
                **own.get("resolve", {}),
            },
            "connect_to": {**self.connect_to(), **own.get("connect_to", {})},
        }
        if self._ca_file is not None:
            network["ca_bundle"] = str(self._ca_file)
        network.update(sections.pop("network", {}))
        merged = {**{k: v for k, v in self.sections.items() if k != "network"}, **sections}
        return Settings.from_mapping(
            {"network": network, "adapters": chosen, **merged}, origin=f"world {self.name}"
        )

    def service(self, *adapters: Mapping[str, Any], **sections: Any) -> ExternalQueryService:
        """An ``ExternalQueryService`` on ``settings(...)`` with the world's clock."""
        return ExternalQueryService(self.settings(*adapters, **sections), clock=self.clock)

    # -- what was asked -----------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        servers = [self.server, *([self._tls_server] if self._tls_server else [])]
        return [request for server in servers for request in server.requests]

    def requests_to(self, path: str, *, host: str | None = None) -> list[RecordedRequest]:
        return [
            request
            for request in self.requests
            if request.path == path and (host is None or request.host == host.lower())
        ]

    # -- servers and lifecycle ------------------------------------------------------------------
    def _server_for(self, scheme: str) -> LoopbackServer:
        if scheme == "http":
            return self.server
        with self._lock:
            if self._tls_server is None:
                ca = WorldCA()
                self._tmp = Path(tempfile.mkdtemp(prefix="eqs-world-"))
                self._ca_file = ca.write_pem(self._tmp / "world-ca.pem")
                self._tls_server = LoopbackServer(tls=ca.server_context()).start()
                self._owned.append(self._tls_server)
            return self._tls_server

    def _refused_port(self) -> int:
        # Bound but never listening: connections are refused, and no one else gets the port.
        with self._lock:
            if self._refusing is None:
                self._refusing = socket.socket()
                self._refusing.bind((LOOPBACK, 0))
            return int(self._refusing.getsockname()[1])

    def close(self) -> None:
        for server in self._owned:
            server.stop()
        self._owned.clear()
        if self._refusing is not None:
            self._refusing.close()
            self._refusing = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _fault_handler(fault: Fault, content_type: str | None) -> Handler:
    def handler(request: RecordedRequest) -> Reply:
        here = request.path + (f"?{request.raw_query}" if request.raw_query else "")
        return fault_reply(fault, content_type=content_type, path=here)

    return handler


def _with_default_urls(adapter: dict[str, Any]) -> dict[str, Any]:
    for field, url in _DEFAULT_URLS.get(str(adapter.get("kind")), {}).items():
        adapter.setdefault(field, url)
    return adapter


def _result_urls(body: bytes) -> list[str]:
    """The ``results[].url`` of a SearXNG answer (nothing when it is not one)."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return []
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        return []
    return [
        item["url"]
        for item in results
        if isinstance(item, dict) and isinstance(item.get("url"), str)
        if item["url"].startswith(("http://", "https://"))
    ]


@contextlib.contextmanager
def open_world(directory: str | Path) -> Iterator[World]:
    """Load a world directory and serve it until the block ends."""
    spec = load_world(directory)
    with World(now=spec.now) as world:
        world.install(spec)
        yield world
