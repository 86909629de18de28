"""The one strict JSON reader, and the bounded file reads in front of it.

Regular files only, a size cap checked on the opened descriptor and again on the bytes
read, UTF-8 (a BOM is accepted and dropped); duplicate keys, NaN/Infinity, syntax errors
and over-deep nesting refused. Each refusal is one line. By default it is an
``InputError``; a caller with its own error vocabulary (the evidence contract) passes a
``Refusal`` that builds its exception from the reason and the detail, and may tighten the
number rules with ``parse_float`` / ``parse_int`` hooks.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = [
    "MAX_JSON_BYTES",
    "Refusal",
    "load_json_file",
    "loads_strict",
    "read_regular_file",
    "read_text_file",
]

MAX_JSON_BYTES = 16 * 1024 * 1024

#: ``(reason, detail) -> exception`` raised for a refusal. ``reason`` is
#: ``file_unreadable`` (missing, not a regular file, too large, cannot open) or
#: ``invalid_json`` (not UTF-8, bad syntax, duplicate key, NaN/Infinity, too deep);
#: ``detail`` is one line that names neither the file nor the origin — the caller adds it.
#: The exception must not be a ``ValueError``, which the reader takes for the json module's.
Refusal = Callable[[str, str], Exception]


def _named(name: str) -> Refusal:
    return lambda reason, detail: InputError(f"{name}: {detail}")


def read_regular_file(
    path: str | Path, *, max_bytes: int = MAX_JSON_BYTES, refuse: Refusal | None = None
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; anything else (missing, a
    FIFO, a device, a directory, too large, unreadable) is refused as ``file_unreadable``
    (by default an ``InputError`` naming the file)."""
    name = str(path)
    fail = refuse or _named(name)
    try:
        # O_NONBLOCK so a FIFO cannot block the open; it is then refused as not regular.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise fail("file_unreadable", "file not found") from None
    except OSError as exc:
        raise fail("file_unreadable", f"cannot open: {exc.strerror}") from None
    # Checked on the descriptor before wrapping it: os.fdopen refuses a folder with an
    # IsADirectoryError that would otherwise escape as an internal error.
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise fail("file_unreadable", "not a regular file")
        if info.st_size > max_bytes:
            raise fail("file_unreadable", f"larger than {max_bytes} bytes")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # the file grew after fstat
        raise fail("file_unreadable", f"larger than {max_bytes} bytes")
    return data


def read_text_file(
    path: str | Path, *, max_bytes: int = MAX_JSON_BYTES, refuse: Refusal | None = None
) -> str:
    """The UTF-8 text (a BOM dropped) of a regular file of at most ``max_bytes``; bytes
    that are not UTF-8 are refused as ``invalid_json`` (by default an ``InputError``
    ``<file>: not UTF-8 text``)."""
    fail = refuse or _named(str(path))
    data = read_regular_file(path, max_bytes=max_bytes, refuse=fail)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise fail("invalid_json", "not UTF-8 text") from None


def loads_strict(
    text: str,
    *,
    origin: str = "input",
    refuse: Refusal | None = None,
    parse_float: Callable[[str], Any] | None = None,
    parse_int: Callable[[str], Any] | None = None,
) -> Any:
    """The JSON value in ``text``. Duplicate keys, NaN/Infinity, bad syntax, nesting too
    deep and any other refusal of the ``json`` module are refused as ``invalid_json`` (by
    default an ``InputError`` starting ``<origin>: invalid JSON:``). ``parse_float`` and
    ``parse_int`` see every number literal; what they raise, unless a ``ValueError``,
    propagates unchanged."""
    fail = refuse or (lambda reason, detail: InputError(f"{origin}: invalid JSON: {detail}"))

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                raise fail("invalid_json", f"duplicate key {key!r}")
            result[key] = value
        return result

    def constant(name: str) -> Any:
        raise fail("invalid_json", f"{name} is not valid JSON")

    try:
        return json.loads(
            text,
            object_pairs_hook=pairs,
            parse_constant=constant,
            parse_float=parse_float,
            parse_int=parse_int,
        )
    except json.JSONDecodeError as exc:
        detail = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise fail("invalid_json", detail) from None
    except RecursionError:
        raise fail("invalid_json", "too deeply nested") from None
    except ValueError:
        # Any other refusal of the json module (an integer past Python's digit limit) is
        # still unusable JSON, never a crash.
        raise fail("invalid_json", "not valid JSON") from None


def load_json_file(path: str | Path, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The JSON value in ``path`` (``read_text_file``, then ``loads_strict``); any problem
    is an ``InputError`` naming the file."""
    return loads_strict(read_text_file(path, max_bytes=max_bytes), origin=str(path))
