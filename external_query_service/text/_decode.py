"""Bytes → text: pick the character encoding of a page body and decode it.

Order of evidence (the first that decodes the body strictly wins):

1. a byte-order mark (UTF-8, UTF-16, UTF-32);
2. the charset declared in the HTTP ``Content-Type`` header;
3. for HTML, a ``<meta charset>`` / ``http-equiv`` (or XML) declaration in the first 4 KB;
4. strict UTF-8;
5. strict GB18030 (Chinese pages without any declaration are mostly GBK).

When nothing decodes strictly (a few stray bytes), the candidate with the fewest replacement
characters is used with ``errors="replace"`` and ``replaced=True``.

Declared labels are read through an allowlist modelled on the WHATWG Encoding Standard:
GB2312 and GBK map to GB18030 (their superset), Big5 to Big5-HKSCS, Latin-1 and ASCII to
windows-1252. Anything else — UTF-7, UTF-16/32 without a BOM, Python-only codecs such as
``unicode_escape`` or ``rot13``, unknown names — is ignored and decoding falls through.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "PRESCAN_BYTES",
    "DecodedText",
    "decode_body",
    "lookup_charset",
]

#: How far into an HTML body we look for a declaration (WHATWG prescans 1 KB; Chinese
#: pages often put long comments or scripts first).
PRESCAN_BYTES: Final = 4096


@dataclass(frozen=True)
class DecodedText:
    """A decoded body.

    ``encoding`` is the Python codec name used; ``declared`` is the label the page declared
    (header first, else the HTML/XML declaration), lower-cased, whether or not it was usable;
    ``replaced`` is True when undecodable bytes were replaced with U+FFFD.
    """

    text: str
    encoding: str
    declared: str | None
    replaced: bool


def _labels(codec: str, *labels: str) -> dict[str, str]:
    return dict.fromkeys(labels, codec)


# Label → Python codec. Keys are lower-case labels as pages write them.
_ALLOWED: Final[dict[str, str]] = {
    **_labels("utf-8", "utf-8", "utf8", "unicode-1-1-utf-8", "x-unicode20utf8"),
    **_labels(
        "gb18030",
        "gb18030",
        "gbk",
        "gb2312",
        "gb_2312",
        "gb_2312-80",
        "x-gbk",
        "cp936",
        "ms936",
        "windows-936",
        "euc-cn",
        "chinese",
        "csgb2312",
        "iso-ir-58",
        "csiso58gb231280",
    ),
    **_labels("big5hkscs", "big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    **_labels(
        "cp932",
        "shift_jis",
        "shift-jis",
        "sjis",
        "x-sjis",
        "ms_kanji",
        "csshiftjis",
        "windows-31j",
        "ms932",
        "cp932",
    ),
    **_labels("euc_jp", "euc-jp", "x-euc-jp", "cseucpkdfmtjapanese"),
    **_labels(
        "cp949",
        "euc-kr",
        "cp949",
        "windows-949",
        "korean",
        "ks_c_5601-1987",
        "ks_c_5601-1989",
        "ksc5601",
        "ksc_5601",
        "csksc56011987",
        "iso-ir-149",
    ),
    # WHATWG: Latin-1 and ASCII labels mean windows-1252.
    **_labels(
        "cp1252",
        "windows-1252",
        "cp1252",
        "x-cp1252",
        "iso-8859-1",
        "iso8859-1",
        "iso_8859-1",
        "iso88591",
        "iso_8859-1:1987",
        "latin1",
        "l1",
        "cp819",
        "ibm819",
        "csisolatin1",
        "iso-ir-100",
        "ascii",
        "us-ascii",
        "ansi_x3.4-1968",
    ),
    **{f"windows-125{n}": f"cp125{n}" for n in range(9)},
    **{f"cp125{n}": f"cp125{n}" for n in range(9)},
    **{f"x-cp125{n}": f"cp125{n}" for n in range(9)},
    **{
        f"{prefix}{n}": f"iso8859_{n}"
        for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)
        for prefix in ("iso-8859-", "iso8859-", "iso_8859-", "iso8859")
    },
    # WHATWG maps ISO-8859-9 to windows-1254 and TIS-620 / ISO-8859-11 to windows-874.
    **_labels("cp1254", "iso-8859-9", "iso8859-9", "iso_8859-9", "latin5"),
    **_labels("cp874", "windows-874", "tis-620", "iso-8859-11", "iso8859-11"),
    **_labels("iso8859_2", "latin2", "l2"),
    **_labels("iso8859_15", "latin9", "l9"),
    **_labels("koi8_r", "koi8-r", "koi8", "koi", "cskoi8r"),
    **_labels("koi8_u", "koi8-u", "koi8-ru"),
    **_labels("cp866", "ibm866", "866", "csibm866"),
    **_labels("mac_roman", "macintosh", "mac", "x-mac-roman", "csmacintosh"),
    **_labels("mac_cyrillic", "x-mac-cyrillic", "x-mac-ukrainian"),
}

#: Labels servers send by default whatever the page is (Apache's old AddDefaultCharset);
#: a more specific signal (a meta declaration, or strict UTF-8) overrides them.
_WEAK_HEADER: Final = "cp1252"

_BOMS: Final = (
    # UTF-32 first: its little-endian BOM starts with the UTF-16 one.
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Bounded quantifiers only: each match attempt does constant work, so a scan is linear.
_META_TAG = re.compile(rb"<meta\b[^<>]{0,1024}>", re.IGNORECASE)
_CHARSET_ATTR = re.compile(
    rb"""charset[ \t\r\n]{0,16}=[ \t\r\n"']{0,16}([A-Za-z0-9._:\-]{1,40})""", re.I
)
_XML_DECL = re.compile(
    rb"^<\?xml\b[^<>?]{0,256}\bencoding[ \t\r\n]{0,16}=[ \t\r\n]{0,16}"
    rb"""["']([A-Za-z0-9._:\-]{1,40})""",
    re.IGNORECASE,
)
_HTML_TYPES: Final = frozenset(
    {"text/html", "application/xhtml+xml", "application/xml", "text/xml"}
)


def lookup_charset(label: str | None) -> str | None:
    """The Python codec for a declared charset label, or None when it is not allowed."""
    if not label:
        return None
    return _ALLOWED.get(label.strip().strip("\"'").lower())


def _prescan(body: bytes) -> str | None:
    """The charset label declared in the first ``PRESCAN_BYTES`` of an HTML/XML body."""
    head = body[:PRESCAN_BYTES]
    xml = _XML_DECL.match(head)
    if xml:
        return xml.group(1).decode("ascii").lower()
    for tag in _META_TAG.finditer(head):
        found = _CHARSET_ATTR.search(tag.group(0))
        if found:
            return found.group(1).decode("ascii").lower()
    return None


def _strict(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except UnicodeDecodeError:
        return None


def decode_body(
    body: bytes, declared_charset: str | None = None, *, content_type: str = "text/html"
) -> DecodedText:
    """Decode a page body; never raises on bad bytes (see the module docstring for the order)."""
    header_label = declared_charset.strip().strip("\"'").lower() if declared_charset else None
    media_type = content_type.split(";", 1)[0].strip().lower()
    meta_label = _prescan(body) if media_type in _HTML_TYPES else None
    declared = header_label or meta_label

    for bom, codec in _BOMS:
        if body.startswith(bom):
            rest = body[len(bom) :]
            text = _strict(rest, codec)
            if text is not None:
                return DecodedText(text, codec, declared, replaced=False)
            return DecodedText(rest.decode(codec, errors="replace"), codec, declared, replaced=True)

    header = lookup_charset(header_label)
    meta = lookup_charset(meta_label)
    has_non_ascii = not body.isascii()
    # A weak header (Latin-1 family) waits until the meta declaration and strict UTF-8 had
    # their turn; a specific header goes first.
    order: list[str] = []
    if header is not None and header != _WEAK_HEADER:
        order.append(header)
    if meta is not None:
        order.append(meta)
    if has_non_ascii:
        order.append("utf-8")
    if header == _WEAK_HEADER:
        order.append(header)
    order += ["utf-8", "gb18030"]

    tried: list[str] = []
    for codec in order:
        if codec in tried:
            continue
        tried.append(codec)
        text = _strict(body, codec)
        if text is not None:
            return DecodedText(text, codec, declared, replaced=False)

    # Nothing decodes strictly: keep the candidate that loses the fewest characters
    # (declared charsets come first in ``tried``, so they win ties).
    best_text, best_codec, best_bad = "", "utf-8", -1
    for codec in tried:
        text = body.decode(codec, errors="replace")
        bad = text.count("\ufffd")
        if best_bad < 0 or bad < best_bad:
            best_text, best_codec, best_bad = text, codec, bad
    return DecodedText(best_text, best_codec, declared, replaced=True)
