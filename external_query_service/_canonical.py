"""Content addressing: strict JSON in, RFC 8785 canonical bytes, ``sha256:<hex>`` ids out.

The hashing contract (``HASH_CONTRACT``) is: ``"sha256:" + sha256(JCS(record)).hexdigest()``
where JCS is RFC 8785 as implemented by the ``rfc8785`` package (keys sorted by UTF-16 code
units, ES6 number formatting — ``json.dumps(sort_keys=True)`` fails the standard's
vectors). Hashed records hold only objects, arrays, strings, booleans, null and integers
within ±(2**53 - 1): no floats (a float like ``2.0**53`` canonicalises to an integer
that no longer round-trips), no lone surrogates. Changing any of this is a new contract
version, and the golden ids pinned in the tests must change with it.

It sits at the top level because two kinds of record are addressed by it: the admission
contract's (``admission/``) and the answer bundle (``_bundle.py``), which the answer model
itself builds.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import rfc8785
from pydantic import JsonValue

from ._digests import sha256_digest
from ._jsonio import loads_strict
from .errors import EvidenceInputError

__all__ = [
    "DIGEST_PATTERN",
    "HASH_CONTRACT",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "canonical_json",
    "check_hashable",
    "content_id",
    "is_digest",
    "loads_record",
    "loads_value",
]

HASH_CONTRACT: Final = "rfc8785-sha256/v0"
MAX_SAFE_INTEGER = 2**53 - 1
DIGEST_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
#: Deeper input is refused before Python's recursion limit is anywhere near.
MAX_DEPTH = 64


def is_digest(value: str) -> bool:
    """Whether ``value`` is spelled ``sha256:<64 lowercase hex>``."""
    return DIGEST_PATTERN.fullmatch(value) is not None


def check_hashable(value: object, *, where: str = "$", depth: int = 0) -> None:
    """Raise ``EvidenceInputError`` unless ``value`` may enter a hashed record."""
    _checked(value, where, depth)


def _checked(value: object, where: str, depth: int) -> bool:
    """``check_hashable``; True when every object in ``value`` is a dict with ASCII keys."""
    if depth > MAX_DEPTH:
        raise EvidenceInputError("invalid_json", f"nested deeper than {MAX_DEPTH} at {where}")
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise EvidenceInputError(
                "integer_out_of_range", f"integer at {where} is beyond ±(2**53 - 1)"
            )
        return True
    if isinstance(value, float):
        raise EvidenceInputError(
            "float_in_hashed_record",
            f"float at {where}: use integer basis points or a decimal string",
        )
    if isinstance(value, str):
        _check_text(value, where)
        return True
    if isinstance(value, list | tuple):
        plain = True
        for index, item in enumerate(value):
            plain = _checked(item, f"{where}[{index}]", depth + 1) and plain
        return plain
    if isinstance(value, Mapping):
        plain = type(value) is dict  # another mapping type goes to rfc8785 (which refuses it)
        for key, item in value.items():
            if not isinstance(key, str):
                raise EvidenceInputError("invalid_json", f"non-string key at {where}")
            _check_text(key, f"{where} (a key)")
            plain = _checked(item, f"{where}.{key}", depth + 1) and key.isascii() and plain
        return plain
    raise EvidenceInputError("invalid_json", f"{type(value).__name__} at {where} is not JSON")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(text: str, where: str) -> None:
    # json.loads turns "\ud800" into a lone surrogate; a valid pair arrives already joined.
    if not text.isascii() and _SURROGATE.search(text):
        raise EvidenceInputError(
            "lone_surrogate", f"lone UTF-16 surrogate in the string at {where}"
        )


def canonical_json(value: object) -> bytes:
    """RFC 8785 bytes of ``value`` after ``check_hashable``.

    A checked record holds no floats, so numbers are plain integers, and the standard
    library's JSON writer escapes strings exactly as RFC 8785 does; only the key order can
    differ (code points against UTF-16 code units), and not for ASCII keys. Records whose
    keys are all ASCII are written by ``json`` (in C); the rest by ``rfc8785``. The tests
    hold both to the same bytes."""
    if _checked(value, "$", 0):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode(
            "utf-8"
        )
    # check_hashable has proven the shape rfc8785 types as its own JSON alias.
    return rfc8785.dumps(value)  # type: ignore[arg-type]


def content_id(value: object) -> str:
    """``sha256:<hex>`` of the canonical bytes: the id of a hashed record."""
    return sha256_digest(canonical_json(value))


# -- strict loading ------------------------------------------------------------------------

#: More digits than any integer within ±(2**53 - 1) has; checked before ``int()`` so a
#: huge literal never reaches Python's own digit limit (a bare ValueError).
_MAX_INT_DIGITS = len(str(MAX_SAFE_INTEGER))


def loads_value(text: str, *, origin: str | None = None) -> JsonValue:
    """Parse JSON text strictly (``jsonio.loads_strict``) and check it may be hashed.

    Refused (``EvidenceInputError``): syntax errors, duplicate keys, NaN/Infinity, floats,
    integers beyond ±(2**53 - 1), lone surrogates and nesting deeper than 64.
    """

    refuse = functools.partial(EvidenceInputError, origin=origin)

    def no_float(literal: str) -> Any:
        raise refuse(
            "float_in_hashed_record",
            f"number {literal} is not an integer: use basis points or a decimal string",
        )

    def bounded_int(literal: str) -> int:
        if len(literal.lstrip("-")) > _MAX_INT_DIGITS:
            raise refuse(
                "integer_out_of_range",
                f"integer of {len(literal)} characters is beyond ±(2**53 - 1)",
            )
        return int(literal)

    value: JsonValue = loads_strict(
        text, refuse=refuse, parse_float=no_float, parse_int=bounded_int
    )
    try:
        check_hashable(value)
    except EvidenceInputError as exc:
        raise refuse(exc.reason, str(exc)) from None
    return value


def loads_record(text: str, *, origin: str | None = None) -> dict[str, JsonValue]:
    """``loads_value`` whose root must be an object (else ``non_object_root``)."""
    value = loads_value(text, origin=origin)
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else type(value).__name__
        raise EvidenceInputError(
            "non_object_root", f"the root must be a JSON object, not {kind}", origin=origin
        )
    return value
