"""Strict reading of JSON files given by path (CLI inputs, semantics, plans).

Regular files only, a size cap checked on the opened descriptor, UTF-8 (a BOM is
accepted and dropped), duplicate keys, NaN/Infinity and over-deep nesting refused —
each as an ``InputError`` with one line.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = ["MAX_JSON_BYTES", "load_json_file", "loads_strict", "read_regular_file"]

MAX_JSON_BYTES = 16 * 1024 * 1024


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InputError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise InputError(f"{name} is not valid JSON")


def loads_strict(text: str, *, origin: str = "input") -> Any:
    """The JSON value in ``text``; duplicate keys, NaN/Infinity, bad syntax and nesting too
    deep are an ``InputError`` starting ``<origin>: invalid JSON:``."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except InputError as exc:
        raise InputError(f"{origin}: invalid JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{origin}: invalid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise InputError(f"{origin}: invalid JSON: too deeply nested") from None


def read_regular_file(path: str | Path, *, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; anything else (missing, a
    FIFO, a device, a directory, too large, unreadable) is an ``InputError``."""
    name = str(path)
    try:
        # O_NONBLOCK so a FIFO cannot block the open; it is then refused as not regular.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{name}: file not found") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot open: {exc.strerror}") from None
    # Checked on the descriptor before wrapping it: os.fdopen refuses a folder with an
    # IsADirectoryError that would otherwise escape as an internal error.
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{name}: not a regular file")
        if info.st_size > max_bytes:
            raise InputError(f"{name}: larger than {max_bytes} bytes")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read(max_bytes + 1)


def load_json_file(path: str | Path, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The JSON value in ``path`` (a regular file of at most ``max_bytes``, UTF-8 with an
    optional BOM), read by ``loads_strict``; any problem is an ``InputError`` naming the file."""
    name = str(path)
    data = read_regular_file(path, max_bytes=max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text") from None
    return loads_strict(text, origin=name)
