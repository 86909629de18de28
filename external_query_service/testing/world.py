"""A live world: search engines, fact APIs and web pages on loopback, the guard left on.

A ``World`` serves HTTP exchanges by absolute URL. Plain ``http`` URLs go to one loopback
server, ``https`` URLs to a second one with a throwaway CA (``tls.py``); ``settings()``
points each origin (``host:port``) there through ``[network] connect_to`` and trusts the
CA through ``ca_bundle``, so URLs, sources and evidence ids stay exactly what was recorded.
Routes match on scheme, host and path; a route's own query is a subset the request must
carry (the most specific match wins), so ``?from=USD&to=CNY`` and ``?from=EUR&to=CNY``
are different answers on one path; a route's ``match`` is likewise a subset of a POST's JSON
body (Tavily's searches, by ``query``).

An adapter that starts an MCP server over stdio (``Endpoints.stdio``) gets the world's own
tool server instead (``_mcp_docs_server.py``, started by the adapter as its command), which
answers the world's ``[[tools]]`` calls or searches hand-given documents. A loaded world's
keyed search adapters read their key from ``WORLD_KEY_ENV``, which the world sets to a
placeholder: the replayed answers ignore keys, and no real key is needed offline.

Built by hand (``route``, ``page``, ``results``, ``fault``...) or from a directory
(``open_world(dir)``, format in ``world_files.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import math
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
from pydantic import ValidationError

from .._clock import Clock, fixed_clock, system_clock
from .._digests import sha256_digest
from ..adapters._page_walk import RecordedWalks
from ..adapters.options import Endpoints
from ..errors import InputError, SettingsError
from ..execution._closing import Closing
from ..gateway._registry import adapter_options
from ..net._fetch import NOT_RECORDED_HEADER
from ..service import ExternalQueryService
from ..settings import AdapterSettings, Settings, format_validation_error
from ._faults import BLOCKED_ADDRESS, DRIP_BYTES_PER_S, ORIGIN_FAULTS, Fault, fault_reply
from ._secrets import REDACTED
from ._tls import WorldCA
from .content import brave_body, searx_body, tavily_body
from .server import LoopbackServer, RecordedRequest, Reply, json_reply
from .world_files import ApiEntry, PageEntry, SearchEntry, ToolEntry, WorldSpec, load_world

__all__ = [
    "BRAVE_URL",
    "DEFAULT_SEARX_URL",
    "FORECAST",
    "FX",
    "GEO",
    "LOOPBACK",
    "SEARX",
    "TAVILY_URL",
    "TOOL_SERVER",
    "WORLD_KEY",
    "WORLD_KEY_ENV",
    "World",
    "open_world",
]

LOOPBACK = "127.0.0.1"
#: Path prefixes of the hand-built fact APIs on the plain server (any host).
SEARX = "/searx"
GEO = "/geo/v1"
FORECAST = "/om/v1"
FX = "/fx/v1"
#: Where a world places a search engine (a searxng adapter) that names no URL of its own.
DEFAULT_SEARX_URL = "https://searx.world.test"
#: The providers' own API roots (the adapters' defaults), served on loopback by a world.
BRAVE_URL = "https://api.search.brave.com/res/v1"
TAVILY_URL = "https://api.tavily.com"
#: The key variable a loaded world's keyed adapters read, set to ``WORLD_KEY``.
WORLD_KEY_ENV = "EXTERNAL_QUERY_WORLD_KEY"
WORLD_KEY = "world-replay-placeholder"
#: The world's MCP tool server: a script run by path with ``-P`` (the testing folder must
#: not shadow the standard library), importing only the SDK.
TOOL_SERVER = Path(__file__).with_name("_mcp_docs_server.py")

_DEFAULT_PORTS = {"http": 80, "https": 443}

Handler = Callable[[RecordedRequest], Reply]
Origin = tuple[str, int]


@dataclass(frozen=True)
class _Route:
    query: tuple[tuple[str, str], ...]
    handler: Handler
    #: Top-level JSON body fields (JSON-encoded values) a request must carry.
    body: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Placed:
    """One ``[[adapters]]`` entry as a world plays it, and where the adapter reaches."""

    table: dict[str, Any]
    adapter_id: str
    endpoints: Endpoints | None  # None: a local adapter (a docs folder)


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


def _json_fields(body: bytes) -> dict[str, str] | None:
    """A JSON object body's top-level fields, each value JSON-encoded; None otherwise."""
    try:
        data = json.loads(body) if body else None
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {str(key): json.dumps(value, sort_keys=True) for key, value in data.items()}


def _body_matches(route: _Route, fields: dict[str, str] | None) -> bool:
    if not route.body:
        return True
    return fields is not None and all(fields.get(key) == value for key, value in route.body)


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


class World(Closing):
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
        self._placed: list[_Placed] = []
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
    def route(
        self,
        url: str,
        reply: Reply | Handler,
        *,
        latency_ms: int = 0,
        match: Mapping[str, Any] | None = None,
        failure_rate: float = 0.0,
        failure: Fault = "http_500",
    ) -> str:
        """Answer requests for ``url`` with ``reply``; returns ``url``. The URL's query is
        the subset a request must carry (none: any query), ``match`` the top-level fields its
        JSON body must hold (a POST's). A later route with the same query and match
        replaces an earlier one. ``failure_rate`` (0 to 1) answers that share of the
        route's requests with the route fault ``failure`` instead, spread evenly and the
        same every run: at 0.3 the 4th, 7th and 10th of every ten fail."""
        target = _target(url)
        body = tuple(
            sorted((key, json.dumps(value, sort_keys=True)) for key, value in (match or {}).items())
        )
        handler = reply if callable(reply) else (lambda _r, fixed=reply: fixed)
        if not 0.0 <= failure_rate <= 1.0:
            raise InputError(f"failure_rate must be between 0 and 1, not {failure_rate}")
        if failure in ORIGIN_FAULTS:
            raise InputError(f"{failure} acts on an origin, not on a share of one route")
        if failure_rate:
            handler = _flaky(handler, failure_rate, failure)
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
            routes[:] = [r for r in routes if (r.query, r.body) != (target.query, body)]
            routes.append(_Route(target.query, handler, body))
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

    def fault(
        self,
        url: str,
        fault: Fault,
        *,
        content_type: str | None = None,
        match: Mapping[str, Any] | None = None,
        drip_bytes_per_s: float = DRIP_BYTES_PER_S,
    ) -> str:
        """Inject ``fault`` (``faults.py``): on ``url``'s route (with ``match``, a POST's),
        or on its whole origin for ``refused`` and ``blocked``. ``drip_bytes_per_s`` is the
        rate of a ``drip``."""
        if fault in ORIGIN_FAULTS:
            target = _target(url)
            with self._lock:
                self._origin_faults[(target.host, target.port)] = fault
            return url
        handler = _fault_handler(fault, content_type, drip_bytes_per_s=drip_bytes_per_s)
        return self.route(url, handler, match=match)

    def _dispatcher(self, key: tuple[str, str, str]) -> Handler:
        def dispatch(request: RecordedRequest) -> Reply:
            pairs = parse_qsl(request.raw_query, keep_blank_values=True)
            fields = _json_fields(request.body)
            with self._lock:
                routes = list(self._routes.get(key, ()))
            found = [
                route for route in routes if _matches(route, pairs) and _body_matches(route, fields)
            ]
            if not found:
                # Said in the header the fetcher reads, so the answer names the request
                # that was never recorded instead of blaming the provider.
                return Reply(404, b"not in this world", "text/plain", headers=_NOT_RECORDED)
            best = max(found, key=lambda route: len(route.query) + len(route.body))
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
        """Answer the geocoding API's ``/search`` with ``handler``."""
        self.server.route(f"{GEO}/search", handler)

    def forecast(self, handler: Handler) -> None:
        """Answer the forecast API's ``/forecast`` with ``handler``."""
        self.server.route(f"{FORECAST}/forecast", handler)

    def fx(self, path: str, reply: Reply) -> None:
        """Answer the exchange-rate API's ``path`` with ``reply``."""
        self.server.route(f"{FX}/{path}", reply)

    def base(self, prefix: str) -> str:
        """The plain-HTTP base URL of the service under ``prefix``."""
        return f"http://{LOOPBACK}:{self.server.port}{prefix}"

    def searxng(self, adapter_id: str = "searx", *, base_url: str | None = None) -> dict[str, Any]:
        """An ``[[adapters]]`` entry for the world's search engine."""
        return {"kind": "searxng", "id": adapter_id, "base_url": base_url or self.base(SEARX)}

    def open_meteo(self) -> dict[str, Any]:
        """An ``[[adapters]]`` entry for the world's weather API."""
        return {
            "kind": "open_meteo",
            "id": "weather",
            "base_url": self.base(FORECAST),
            "geocoding_url": self.base(GEO),
        }

    def frankfurter(self) -> dict[str, Any]:
        """An ``[[adapters]]`` entry for the world's exchange-rate API."""
        return {"kind": "frankfurter", "id": "fx", "base_url": self.base(FX)}

    def brave(self, adapter_id: str = "brave", **options: Any) -> dict[str, Any]:
        """A ``brave`` adapter at Brave's own API root (served here); ``options`` added."""
        return {"kind": "brave", "id": adapter_id, **options}

    def brave_results(
        self, query: str, hits: list[dict[str, Any]], *, base_url: str = BRAVE_URL
    ) -> str:
        """What Brave answers for ``query`` (``hit()`` results); returns the route's URL."""
        url = f"{base_url.rstrip('/')}/web/search?{httpx.QueryParams({'q': query})}"
        return self.route(url, json_reply(brave_body(query, hits)))

    def tavily(self, adapter_id: str = "tavily", **options: Any) -> dict[str, Any]:
        """A ``tavily`` adapter at Tavily's own API root (served here); ``options`` added."""
        return {"kind": "tavily", "id": adapter_id, **options}

    def tavily_results(
        self,
        query: str,
        hits: list[dict[str, Any]],
        *,
        raw: tuple[str | None, ...] = (),
        base_url: str = TAVILY_URL,
    ) -> str:
        """What Tavily answers for a search of ``query`` (``raw``: each hit's
        ``raw_content``, by position); returns the route's URL."""
        url = f"{base_url.rstrip('/')}/search"
        return self.route(
            url, json_reply(tavily_body(query, hits, raw=raw)), match={"query": query}
        )

    def mcp_docs(
        self,
        adapter_id: str = "docs",
        *,
        documents: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
        tool: str = "search_docs",
        arguments: dict[str, Any] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        """An ``mcp_docs`` adapter whose server is this world's tool server, searching
        ``documents`` (``{"title", "text", "url"?}``); ``spec`` adds server settings
        (``fault``, ``calls``, ``pid_file``, ``input_schema``: see ``_mcp_docs_server.py``)."""
        path = self._write_tool_spec(
            adapter_id, {"tool": tool, "documents": list(documents), **spec}
        )
        table: dict[str, Any] = {
            "kind": "mcp_docs",
            "id": adapter_id,
            "command": _tool_command(path),
            "tool": tool,
        }
        if arguments is not None:
            table["arguments"] = arguments
        return table

    def tool_spec(self, adapter_id: str) -> dict[str, Any]:
        """The tool server settings of ``adapter_id`` (read afresh by the server per call)."""
        data: dict[str, Any] = json.loads(self._tool_spec_path(adapter_id).read_text("utf-8"))
        return data

    def set_tool_spec(self, adapter_id: str, **changes: Any) -> None:
        """Change the tool server settings of ``adapter_id`` (a key set to None is removed);
        the next call sees them."""
        spec = {**self.tool_spec(adapter_id), **changes}
        self._write_tool_spec(adapter_id, {k: v for k, v in spec.items() if v is not None})

    def _tool_spec_path(self, adapter_id: str) -> Path:
        return self._scratch() / f"tools-{sha256_digest(adapter_id)[7:23]}.json"

    def _write_tool_spec(self, adapter_id: str, spec: Mapping[str, Any]) -> Path:
        path = self._tool_spec_path(adapter_id)
        staged = path.with_suffix(".tmp")
        staged.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        staged.replace(path)  # the server never reads half a file
        return path

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
        self._placed = _place(manifest.adapters, f"world {spec.name}")
        self.adapters = [placed.table for placed in self._placed]
        for placed in self._placed:
            endpoints = placed.endpoints or Endpoints()
            if endpoints.stdio:
                self._install_tools(spec, placed, endpoints.stdio)
            if endpoints.key_env:
                placed.table[endpoints.key_env] = WORLD_KEY_ENV
                os.environ.setdefault(WORLD_KEY_ENV, WORLD_KEY)
            for url in endpoints.urls.values():
                self.claim(url)
            if endpoints.search_url:
                base = endpoints.search_url.rstrip("/")
                self.route(f"{base}/config", json_reply({"instance_name": spec.name}))
        for search in manifest.search:
            self._install_search(spec, search)
        exchanges: list[PageEntry | ApiEntry] = [*manifest.pages, *manifest.api]
        for entry in exchanges:
            self._install_exchange(spec, entry)

    def _install_tools(self, spec: WorldSpec, placed: _Placed, option: str) -> None:
        """Play ``placed``'s recorded tool calls with this world's tool server."""
        entries: list[ToolEntry] = [
            e for e in spec.manifest.tools if e.adapter == placed.adapter_id
        ]
        calls = []
        for entry in entries:
            call: dict[str, Any] = {"arguments": entry.arguments}
            body = spec.body(entry)
            if entry.fault is not None:
                call["fault"] = entry.fault
            elif body is not None:
                try:
                    call["result"] = json.loads(body)
                except (UnicodeDecodeError, ValueError) as exc:
                    raise InputError(f"{spec.root}: {entry.file}: not JSON ({exc})") from None
            else:
                raise InputError(f"{spec.root}: a [[tools]] entry has no file, text or fault")
            calls.append(call)
        tool = str(placed.table.get("tool", "search_docs"))
        path = self._write_tool_spec(
            placed.adapter_id, {"tool": tool, "calls": calls, "input_schema": {"type": "object"}}
        )
        placed.table[option] = _tool_command(path)

    def _install_search(self, spec: WorldSpec, entry: SearchEntry) -> None:
        engines = [
            placed.endpoints.search_url
            for placed in self._placed
            if placed.endpoints is not None and placed.endpoints.search_url
            if entry.adapter in (None, placed.adapter_id)
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
        for engine in engines:
            base = engine.rstrip("/")
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
        match = getattr(entry, "match", None)
        content_type = default_type if declared is None else (declared or None)
        fault = entry.fault
        if fault in ORIGIN_FAULTS:
            self.claim(url)
            self.fault(url, fault)
            return
        if fault is not None:
            self.route(
                url,
                _fault_handler(fault, content_type),
                latency_ms=entry.latency_ms,
                match=match,
            )
            return
        if redirect_to is not None:
            status = entry.status if 300 <= entry.status < 400 else 302
            reply = Reply(status=status, content_type=None, headers={"Location": redirect_to})
        else:
            reply = Reply(status=entry.status, body=body or b"", content_type=content_type)
        self.route(url, reply, latency_ms=entry.latency_ms, match=match)

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
        trusted, the guard on (only 127.0.0.1 admitted). ``network=`` entries override.

        Pages are analysed in a thread of the service's own process unless ``[analysis]
        processes`` is given (by the world or ``analysis=``): a world's service answers a
        question or a few, whose pages are analysed in a thread anyway while worker processes
        warm up, and starting two workers (each a fresh interpreter loading the text pipeline,
        about 0.9 s of CPU) for every case or test would cost far more than they save."""
        chosen = _place(adapters, f"world {self.name}") if adapters else self._placed
        for placed in chosen:
            for url in (placed.endpoints or Endpoints()).urls.values():
                if not _is_ip(_target(url).host):
                    self.claim(url)
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
        merged["analysis"] = {"processes": 0, **merged.get("analysis", {})}
        return Settings.from_mapping(
            {"network": network, "adapters": [placed.table for placed in chosen], **merged},
            origin=f"world {self.name}",
        )

    def service(self, *adapters: Mapping[str, Any], **sections: Any) -> ExternalQueryService:
        """An ``ExternalQueryService`` on ``settings(...)`` with the world's clock, whose page
        walks end as the recording's did (``recorded_walks``)."""
        return ExternalQueryService(
            self.settings(*adapters, **sections),
            clock=self.clock,
            recorded_walks=self.recorded_walks(),
        )

    def recorded_walks(self) -> RecordedWalks | None:
        """The page walks of the recording this world was loaded from, fresh for one service
        (``ExternalQueryService(recorded_walks=...)``); None for a world without them."""
        return self.spec.recorded_walks() if self.spec is not None else None

    # -- what was asked -----------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request the world's servers received."""
        servers = [self.server, *([self._tls_server] if self._tls_server else [])]
        return [request for server in servers for request in server.requests]

    def requests_to(self, path: str, *, host: str | None = None) -> list[RecordedRequest]:
        """The requests received for ``path`` (on ``host``, when given), in order."""
        return [
            request
            for request in self.requests
            if request.path == path and (host is None or request.host == host.lower())
        ]

    # -- servers and lifecycle ------------------------------------------------------------------
    def _scratch(self) -> Path:
        """The world's own temporary folder (CA file, tool server settings)."""
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="eqs-world-"))
        return self._tmp

    def _server_for(self, scheme: str) -> LoopbackServer:
        if scheme == "http":
            return self.server
        with self._lock:
            if self._tls_server is None:
                ca = WorldCA()
                self._ca_file = ca.write_pem(self._scratch() / "world-ca.pem")
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
        """Stop the servers the world started and remove its temporary files."""
        for server in self._owned:
            server.stop()
        self._owned.clear()
        if self._refusing is not None:
            self._refusing.close()
            self._refusing = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    async def aclose(self) -> None:
        """``close()`` from a running loop (the servers run on threads of their own)."""
        self.close()


_NOT_RECORDED = dict([NOT_RECORDED_HEADER])


def _place(tables: Iterable[Mapping[str, Any]], origin: str) -> list[_Placed]:
    """``[[adapters]]`` entries as a world plays them, each with the endpoints its adapter
    declares (``Adapter.Options.endpoints``). A search engine with no URL of its own is
    placed at ``DEFAULT_SEARX_URL``."""
    placed = []
    for index, given in enumerate(tables):
        table = dict(given)
        adapter = _adapter_settings(table, f"{origin}: adapters.{index}")
        endpoints = adapter_options(adapter).endpoints()
        if endpoints is not None and endpoints.search is not None and not endpoints.search_url:
            table[endpoints.search] = DEFAULT_SEARX_URL
            adapter = _adapter_settings(table, f"{origin}: adapters.{index}")
            endpoints = adapter_options(adapter).endpoints()
        placed.append(_Placed(table, adapter.id, endpoints))
    return placed


def _tool_command(spec: Path) -> list[str]:
    """The world's tool server for the settings in ``spec``, as an adapter's command."""
    return [sys.executable, "-P", str(TOOL_SERVER), str(spec)]


def _adapter_settings(table: Mapping[str, Any], where: str) -> AdapterSettings:
    try:
        return AdapterSettings.model_validate(table)
    except ValidationError as exc:
        raise SettingsError(f"{where}.{format_validation_error(exc)}") from None


def _fault_handler(
    fault: Fault, content_type: str | None, *, drip_bytes_per_s: float = DRIP_BYTES_PER_S
) -> Handler:
    if fault == "drip" and not drip_bytes_per_s > 0:
        raise InputError(f"drip_bytes_per_s must be more than zero, not {drip_bytes_per_s}")

    def handler(request: RecordedRequest) -> Reply:
        here = request.path + (f"?{request.raw_query}" if request.raw_query else "")
        return fault_reply(
            fault, content_type=content_type, path=here, drip_bytes_per_s=drip_bytes_per_s
        )

    return handler


def _flaky(handler: Handler, rate: float, failure: Fault) -> Handler:
    """``handler``, except that request n (from 1) gets ``failure`` when ``floor(n * rate)``
    steps up: ``rate`` of all requests, evenly spread, in the same places every run."""
    fail = _fault_handler(failure, None)
    lock = threading.Lock()
    seen = [0]

    def flaky(request: RecordedRequest) -> Reply:
        with lock:
            seen[0] += 1
            n = seen[0]
        if math.floor(n * rate) > math.floor((n - 1) * rate):
            return fail(request)
        return handler(request)

    return flaky


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
