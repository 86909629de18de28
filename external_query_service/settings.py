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
user_agent = "external-query-service/0.1 (evidence fetcher)"

[[adapters]]
kind = "searxng"
id = "searx"
base_url = "http://127.0.0.1:8888"

[sources]
allow_domains = []
deny_domains = ["example.org"]

[verifier]
min_sources_direct_fact = 1
min_sources_summary = 1
min_sources_per_compare_target = 1
max_age_days = 14
```
"""

from __future__ import annotations

import ipaddress
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._version import __version__
from .errors import InputError, SettingsError
from .jsonio import read_regular_file

__all__ = [
    "AdapterSettings",
    "GitHubSettings",
    "LLMSettings",
    "LedgerSettings",
    "NetworkSettings",
    "Settings",
    "SourceSettings",
    "VerifierSettings",
    "format_validation_error",
]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_USER_AGENT = f"external-query-service/{__version__} (evidence fetcher)"
MAX_SETTINGS_BYTES = 1024 * 1024


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NetworkSettings(_Section):
    allowed_networks: tuple[IPNetwork, ...] = ()
    resolve: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=10.0, gt=0)
    deadline_s: float = Field(default=20.0, gt=0)
    max_page_bytes: int = Field(default=2_000_000, gt=0)
    max_pages: int = Field(default=5, ge=1, le=50)
    max_redirects: int = Field(default=3, ge=0, le=10)
    user_agent: str = Field(default=DEFAULT_USER_AGENT, min_length=1)
    #: ``"host:port" -> "host:port"``: open the connection to the right-hand side instead,
    #: like ``curl --connect-to``. URL, Host header, TLS name, sources and evidence ids keep
    #: the original; the guard judges the address actually connected to (so a loopback
    #: target must be inside ``allowed_networks``). Replaying a recorded world uses this.
    connect_to: dict[str, str] = Field(default_factory=dict)
    #: Extra CA certificates (a PEM file) trusted besides certifi's roots, for the fetcher
    #: and trusted endpoints alike (a test world's local CA, a corporate CA).
    ca_bundle: Path | None = None

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
    """``host:port`` normalised (lower case, no trailing dot); IPv6 hosts in brackets."""
    host, sep, port = text.strip().rpartition(":")
    host = host.lower().rstrip(".")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{where} is not host:port: {text!r}")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError(f"{where}: put an IPv6 host in brackets: {text!r}")
    return f"{host}:{int(port)}"


class AdapterSettings(_Section):
    kind: str = Field(min_length=1)
    id: str = ""
    base_url: str | None = None
    geocoding_url: str | None = None
    root: Path | None = None
    enabled: bool = True
    #: Free-form options for third-party adapters; built-ins accept none.
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _default_id(self) -> AdapterSettings:
        if not self.id:
            object.__setattr__(self, "id", self.kind)
        return self


def _domain_list(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(item.strip().lower().strip(".") for item in values if item.strip())


class SourceSettings(_Section):
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()

    _clean = field_validator("allow_domains", "deny_domains")(_domain_list)


class VerifierSettings(_Section):
    min_sources_direct_fact: int = Field(default=1, ge=1)
    min_sources_summary: int = Field(default=1, ge=1)
    min_sources_per_compare_target: int = Field(default=1, ge=1)
    max_age_days: int = Field(default=14, ge=0)


class LLMSettings(_Section):
    """An OpenAI-compatible chat completions endpoint. Absent: no model is used."""

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    #: Name of the environment variable holding the API key; the key itself is never stored.
    api_key_env: str | None = None
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=1, ge=0, le=5)
    temperature: float = Field(default=0.0, ge=0, le=2)


class LedgerSettings(_Section):
    """Where admissions are persisted (SQLite). Absent: the chain keeps them in memory."""

    path: Path | None = None


class GitHubSettings(_Section):
    """Endpoints of the public-github evidence method (overridable for loopback tests)."""

    api_url: str = "https://api.github.com"
    raw_url: str = "https://raw.githubusercontent.com"


class Settings(_Section):
    network: NetworkSettings = NetworkSettings()
    adapters: tuple[AdapterSettings, ...] = ()
    sources: SourceSettings = SourceSettings()
    verifier: VerifierSettings = VerifierSettings()
    llm: LLMSettings | None = None
    ledger: LedgerSettings = LedgerSettings()
    github: GitHubSettings = GitHubSettings()

    @model_validator(mode="after")
    def _unique_ids(self) -> Settings:
        ids = [adapter.id for adapter in self.adapters]
        duplicates = sorted({item for item in ids if ids.count(item) > 1})
        if duplicates:
            raise ValueError(f"duplicate adapter ids: {', '.join(duplicates)}")
        return self

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, origin: str = "settings") -> Settings:
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise SettingsError(f"{origin}: {format_validation_error(exc)}") from None

    @classmethod
    def from_toml(cls, text: str, *, origin: str = "settings") -> Settings:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{origin}: invalid TOML: {exc}") from None
        return cls.from_mapping(data, origin=origin)

    @classmethod
    def load(cls, path: str | Path) -> Settings:
        """Read settings from a TOML file. Relative ``root`` paths resolve against its folder."""
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
        """Resolve relative paths (adapter roots, the ledger, the CA bundle) against ``base``."""
        adapters = tuple(
            adapter.model_copy(update={"root": base / adapter.root})
            if adapter.root is not None and not adapter.root.is_absolute()
            else adapter
            for adapter in self.adapters
        )
        ledger = self.ledger
        if ledger.path is not None and not ledger.path.is_absolute():
            ledger = ledger.model_copy(update={"path": base / ledger.path})
        network = self.network
        if network.ca_bundle is not None and not network.ca_bundle.is_absolute():
            network = network.model_copy(update={"ca_bundle": base / network.ca_bundle})
        return self.model_copy(update={"adapters": adapters, "ledger": ledger, "network": network})

    def with_adapter(self, adapter: AdapterSettings) -> Settings:
        """A copy with one more adapter (ids stay unique)."""
        return Settings.model_validate(
            {
                **self.model_dump(),
                "adapters": [*self.model_dump()["adapters"], adapter.model_dump()],
            }
        )

    def with_docs(self, root: str | Path, *, adapter_id: str = "docs") -> Settings:
        return self.with_adapter(AdapterSettings(kind="local_docs", id=adapter_id, root=Path(root)))


def format_validation_error(exc: ValidationError) -> str:
    """One line: the first error's location and message, plus how many more there are."""
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
    return f"{location}: {message}{more}"
