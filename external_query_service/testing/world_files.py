"""The world directory: ``world.toml`` plus the files it names. Load, check and write.

```toml
[world]
name = "zhanjiang-weather"
now = "2026-11-30T10:00:00+08:00"      # optional fixed clock (with an offset)

[network]                              # optional: budgets (max_pages, timeout_s, ...)
max_pages = 3

[[adapters]]                           # the providers this world plays
kind = "searxng"
id = "searx"
base_url = "https://searx.example.org"

[[search]]                             # a SearXNG answer, by query (no query: any query)
query = "湛江明天天气怎么样？"
file = "search/0001.json"              # or: text = "...", or inline results = [{...}]
sha256 = "sha256:..."                  # optional; checked on load

[[pages]]                              # a page, by URL
url = "https://weather.example.cn/zhanjiang"
file = "pages/0001.html"
content_type = "text/html; charset=utf-8"

[[api]]                                # a fact-API answer; the URL's query is a subset match
url = "https://api.frankfurter.dev/v1/latest?from=USD&to=CNY"
file = "api/0001.json"

[[api]]                                # a POST answer: ``match`` is a subset of the JSON body
url = "https://api.tavily.com/search"
match = { query = "湛江 台风" }
file = "api/0002.json"

[[tools]]                              # an MCP tool call (stdio adapters), by exact arguments
adapter = "docs"
tool = "search_docs"
arguments = { query = "widget cache" }
file = "tools/0003.json"               # the CallToolResult as JSON

[[walks]]                              # how a recorded page walk ended (recorded worlds)
adapter = "searx"
hits = ["https://a.example.cn/1", "https://b.example.cn/2", "https://c.example.cn/3"]
fates = ["read", "cut_off"]            # one per hit reached, in order; the rest not reached
```

Every entry may also carry ``status``, ``latency_ms``, ``fault`` (see ``faults.py``),
``redirect_to`` (pages and api: answer 302 there) and ``note``. File names are relative
to the directory and may not leave it. ``[[walks]]`` came with the recording's walks; a
world without them (hand-written, or recorded before they were kept) replays by the walk's
own rules.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import Field, JsonValue, ValidationError, ValidationInfo, field_validator

from .._digests import sha256_digest
from .._frozen import Frozen
from ..adapters._page_walk import RecordedWalks, WalkRecord
from ..errors import InputError, SettingsError
from ..gateway._registry import adapter_options
from ..settings import Settings, format_validation_error
from ._faults import Fault

__all__ = [
    "MAX_WORLD_BYTES",
    "WORLD_FILE",
    "ApiEntry",
    "PageEntry",
    "RecordedRun",
    "SearchEntry",
    "ToolEntry",
    "WalkEntry",
    "WorldInfo",
    "WorldManifest",
    "WorldSpec",
    "check_free_folder",
    "dump_toml",
    "load_world",
    "write_world",
]

WORLD_FILE = "world.toml"
#: All body files of one world together; a recording that would exceed it is refused.
MAX_WORLD_BYTES = 64 * 1024 * 1024


class WorldInfo(Frozen):
    """A world's name, description and fixed "now"."""

    name: str = ""
    description: str = ""
    #: The fixed "now" of this world (with an offset); absent: the caller's clock.
    now: datetime | None = None

    @field_validator("now")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.utcoffset() is None:
            raise ValueError("now needs an offset, e.g. 2026-11-30T10:00:00+08:00")
        return value


class RecordedRun(Frozen):
    """How a recorded world came to be: the question asked and the answer it got."""

    question: str
    semantics_file: str | None = None
    answer_file: str | None = None
    status: str = ""
    reason: str | None = None


class _Body(Frozen):
    file: str | None = None
    text: str | None = None
    sha256: str | None = None
    status: int = Field(default=200, ge=100, le=599)
    latency_ms: int = Field(default=0, ge=0)
    fault: Fault | None = None
    note: str = ""

    @field_validator("file")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or "\\" in value or not path.parts:
            raise ValueError(f"file must be a relative path inside the world: {value!r}")
        return value


class SearchEntry(_Body):
    """A SearXNG answer for ``query`` (any query when absent) on ``adapter`` (every
    searxng adapter when absent)."""

    query: str | None = None
    adapter: str | None = None
    #: Inline hits (``hit()`` fields) instead of a file: wrapped into a SearXNG answer.
    results: tuple[dict[str, JsonValue], ...] | None = None


class PageEntry(_Body):
    """A recorded page: its URL, body file, content type and redirect."""

    url: str
    content_type: str | None = None  # absent: text/html; charset=utf-8; "": none sent
    redirect_to: str | None = None


class ApiEntry(_Body):
    """A recorded fact-API reply: its URL, body file, content type and redirect."""

    url: str
    content_type: str | None = None  # absent: application/json
    redirect_to: str | None = None
    #: For a POST: top-level fields the JSON request body must hold (most specific wins).
    match: dict[str, JsonValue] | None = None


#: What a tool call can fail with on replay: never answers, the server exits, too much text.
ToolFault = Literal["hang", "reset", "oversized"]


class ToolEntry(_Body):
    """One call of an MCP tool, answered by a world's tool server when the arguments are
    exactly these: the ``CallToolResult`` in ``file`` (or ``text``), or ``fault``."""

    adapter: str
    tool: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    fault: ToolFault | None = None


class WalkEntry(Frozen):
    """How one page walk of the recording ended: ``adapter``'s walk over ``hits`` (the
    URLs, in order) reached the first ``len(fates)`` of them, and each came to its fate
    (``read``, or the page's failure: ``cut_off``, ``cut_off:analysis``, ``error_status:404``
    ...). A replay's walk over the same hits ends the same way (``_page_walk.RecordedWalks``)."""

    adapter: str
    hits: tuple[str, ...]
    fates: tuple[str, ...] = ()

    @field_validator("fates")
    @classmethod
    def _reached(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        hits = info.data.get("hits")
        if hits is not None and len(value) > len(hits):
            raise ValueError("a walk has at most one fate per hit")
        return value

    def record(self) -> WalkRecord:
        """The entry as the walk's ``WalkRecord``."""
        return WalkRecord(self.adapter, self.hits, self.fates)


class WorldManifest(Frozen):
    """``world.toml`` as a typed model."""

    world: WorldInfo = WorldInfo()
    recorded: RecordedRun | None = None
    network: dict[str, Any] = Field(default_factory=dict)
    sources: dict[str, Any] = Field(default_factory=dict)
    verifier: dict[str, Any] = Field(default_factory=dict)
    adapters: tuple[dict[str, Any], ...] = ()
    search: tuple[SearchEntry, ...] = ()
    pages: tuple[PageEntry, ...] = ()
    api: tuple[ApiEntry, ...] = ()
    tools: tuple[ToolEntry, ...] = ()
    walks: tuple[WalkEntry, ...] = ()


@dataclass(frozen=True)
class WorldSpec:
    """A loaded world: its manifest and the bytes of every file it names."""

    root: Path
    manifest: WorldManifest
    files: Mapping[str, bytes]

    @property
    def name(self) -> str:
        """The manifest's name, or the folder's."""
        return self.manifest.world.name or self.root.name

    @property
    def now(self) -> datetime | None:
        """The world's fixed "now", when it has one."""
        return self.manifest.world.now

    def recorded_semantics(self, question: str) -> dict[str, Any] | None:
        """The ``query_semantics`` this world was recorded with, when ``question`` is the
        recorded question (a replay that drops them plans differently); else None."""
        run = self.manifest.recorded
        if run is None or run.question != question or run.semantics_file is None:
            return None
        base = self.root.resolve()
        path = (self.root / run.semantics_file).resolve()
        if not path.is_relative_to(base) or not path.is_file():
            raise InputError(f"{self.root}: {run.semantics_file}: not a file inside the world")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"{path}: {exc}") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}: the root must be a JSON object")
        return data

    def recorded_walks(self) -> RecordedWalks | None:
        """The recording's page walks, for a replay to end alike (fresh each call: a replay
        takes them as it walks); None for a world that kept none."""
        walks = self.manifest.walks
        return RecordedWalks(entry.record() for entry in walks) if walks else None

    def body(self, entry: SearchEntry | PageEntry | ApiEntry | ToolEntry) -> bytes | None:
        """The entry's body: its file, its inline text, or None."""
        if entry.file is not None:
            return self.files[entry.file]
        if entry.text is not None:
            return entry.text.encode("utf-8")
        return None


def load_world(directory: str | Path) -> WorldSpec:
    """Read and check a world directory. Bad input is an ``InputError`` with one line."""
    root = Path(directory)
    manifest_path = root / WORLD_FILE
    if not manifest_path.is_file():
        raise InputError(f"{root}: not a world (no {WORLD_FILE})")
    try:
        data = tomllib.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{manifest_path}: {exc}") from None
    try:
        manifest = WorldManifest.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{manifest_path}: {format_validation_error(exc)}") from None
    _check_settings(manifest, str(manifest_path))
    files = _read_files(root, manifest)
    return WorldSpec(root=root, manifest=manifest, files=files)


def _check_settings(manifest: WorldManifest, origin: str) -> None:
    sections: dict[str, Any] = {"adapters": list(manifest.adapters)}
    for name in ("network", "sources", "verifier"):
        if getattr(manifest, name):
            sections[name] = getattr(manifest, name)
    for adapter in Settings.from_mapping(sections, origin=origin).adapters:
        try:
            adapter_options(adapter)  # each adapter's own keys, by its Options
        except SettingsError as exc:
            raise SettingsError(f"{origin}: {exc}") from None


def _entries(manifest: WorldManifest) -> list[SearchEntry | PageEntry | ApiEntry | ToolEntry]:
    return [*manifest.search, *manifest.pages, *manifest.api, *manifest.tools]


def _read_files(root: Path, manifest: WorldManifest) -> dict[str, bytes]:
    base = root.resolve()
    files: dict[str, bytes] = {}
    total = 0
    for entry in _entries(manifest):
        if entry.file is None:
            continue
        if entry.text is not None or getattr(entry, "results", None) is not None:
            raise InputError(f"{root / WORLD_FILE}: {entry.file}: give file, text or results")
        path = (root / entry.file).resolve()
        if not path.is_relative_to(base) or not path.is_file():
            raise InputError(f"{root}: {entry.file}: not a file inside the world")
        if entry.file not in files:
            data = path.read_bytes()
            total += len(data)
            if total > MAX_WORLD_BYTES:
                raise InputError(f"{root}: files larger than {MAX_WORLD_BYTES} bytes")
            files[entry.file] = data
        if entry.sha256 is not None and sha256_digest(files[entry.file]) != entry.sha256:
            raise InputError(f"{root}: {entry.file}: digest does not match world.toml")
    return files


def check_free_folder(directory: str | Path) -> Path:
    """``directory`` as a path if it is missing or an empty folder; else ``InputError``
    (a world is never written over anything)."""
    root = Path(directory)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise InputError(f"{root}: exists and is not an empty folder; choose another")
    return root


def write_world(directory: str | Path, manifest: WorldManifest, files: Mapping[str, bytes]) -> Path:
    """Write ``files`` and ``world.toml`` into ``directory`` (which must not hold a world)."""
    root = check_free_folder(directory)
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    root.mkdir(parents=True, exist_ok=True)
    table = manifest.model_dump(mode="json", exclude_defaults=True)
    (root / WORLD_FILE).write_text(dump_toml(table), encoding="utf-8")
    return root


# -- a small TOML writer for the shapes above (tomllib reads; the stdlib cannot write) ------


def _string(value: str) -> str:
    # JSON string escapes are valid TOML basic-string escapes; DEL must be escaped too.
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value if item is not None) + "]"
    if isinstance(value, dict):
        pairs = (f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + ", ".join(pairs) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _table_body(table: Mapping[str, Any]) -> list[str]:
    return [f"{_key(key)} = {_value(value)}" for key, value in table.items() if value is not None]


def dump_toml(data: Mapping[str, Any]) -> str:
    """TOML for a mapping whose top level holds scalars, tables and arrays of tables."""
    lines = _table_body({k: v for k, v in data.items() if not _is_table(v)})
    for key, value in data.items():
        if isinstance(value, dict) and value:
            lines += ["", f"[{_key(key)}]", *_table_body(value)]
        elif _is_array_of_tables(value):
            for item in value:
                lines += ["", f"[[{_key(key)}]]", *_table_body(item)]
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_array_of_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _is_table(value: Any) -> bool:
    return isinstance(value, dict) or _is_array_of_tables(value)
