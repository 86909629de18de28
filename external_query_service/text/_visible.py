"""What a reader sees of a text: invisible code points dropped.

Format characters, private use, controls (except newline, carriage return and tab), the tag
block, variation selectors, the combining grapheme joiner and the Hangul fillers can hide
text from a reader while a machine still reads it. ``strip_invisible`` is the one place that
drops them; stored evidence and its digests keep the original text.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["strip_invisible"]

# Invisible code points outside the Cf/Co/Cc categories that still hide text: variation
# selectors (used to smuggle bytes after a visible character), the combining grapheme
# joiner and the Hangul fillers.
_INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0xE0000, 0xE007F),  # tag block (includes its unassigned code points)
    (0xFE00, 0xFE0F),
    (0xE0100, 0xE01EF),
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x3164, 0x3164),
    (0xFFA0, 0xFFA0),
)
_KEPT_CONTROLS = frozenset("\n\r\t")


@functools.lru_cache(maxsize=8192)  # per character: texts repeat theirs, and this runs per answer
def _is_invisible(char: str) -> bool:
    point = ord(char)
    if any(low <= point <= high for low, high in _INVISIBLE_RANGES):
        return True
    category = unicodedata.category(char)
    # Cf covers zero-width characters, bidi controls and the tag block; Co is private use.
    if category in ("Cf", "Co"):
        return True
    return category == "Cc" and char not in _KEPT_CONTROLS


class _InvisibleTable(dict[int, int | None]):
    """A ``str.translate`` table built as it is used: each code point maps to None (drop)
    when ``_is_invisible``, else to itself. Entries are kept for the first ``_TABLE_MAX``
    code points seen, so the usual text is stripped in C at dictionary speed and a text of
    every code point cannot grow it without bound."""

    def __missing__(self, point: int) -> int | None:
        mapped = None if _is_invisible(chr(point)) else point
        if len(self) < _TABLE_MAX:
            self[point] = mapped
        return mapped


_TABLE_MAX = 65536
_INVISIBLE = _InvisibleTable()


def strip_invisible(text: str) -> str:
    """Return ``text`` without format, private-use, control (except newline and tab),
    tag-block, variation-selector and filler characters.

    This is the view a reader or an LLM gets; stored evidence and its digests keep the
    original text.
    """
    if _PLAIN.fullmatch(text):  # the common case, checked in C: nothing to strip
        return text
    return text.translate(_INVISIBLE)


#: Characters that are never invisible (printable ASCII and the kept controls, CJK
#: punctuation, CJK ideographs, full-width forms): a text made of them only is returned as is.
_PLAIN = re.compile(r"[\x20-\x7e\n\r\t\u3000-\u303f\u4e00-\u9fff\uff01-\uff5e]*")
