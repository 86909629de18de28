"""Small PDFs written by hand for the tests: text pages (CJK included), scanned pages,
encrypted files and bombs. Nothing is downloaded and no font file is needed.

Text is drawn with one Type0 font (``Identity-H``, not embedded) whose glyph ids are the
characters' UTF-16 code units, and a ``ToUnicode`` map that says so: every text extractor
reads the characters back from that map, so Chinese text comes out exactly as written.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "PdfPage",
    "deflate_bomb",
    "encrypted_pdf",
    "nested_bomb",
    "page_tree_bomb",
    "shared_stream_bomb",
    "text_pdf",
]

# The standard security handler's padding (ISO 32000-1, 7.6.3.3).
_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")
_FILE_ID = bytes.fromhex("00112233445566778899aabbccddeeff")


@dataclass(frozen=True)
class PdfPage:
    """One page: lines of text, and whether it carries a picture (a scanned page has a
    picture and no text)."""

    lines: tuple[str, ...] = ()
    picture: bool = False


def text_pdf(pages: Sequence[Sequence[str] | PdfPage]) -> bytes:
    """A PDF with one page per item: each a sequence of text lines, or a ``PdfPage``."""
    return _Writer().document([_page(item) for item in pages])


def encrypted_pdf(lines: Sequence[str], *, user_password: str = "secret") -> bytes:
    """A one-page PDF encrypted with RC4 (40-bit, revision 2) that needs ``user_password``
    to open."""
    return _Writer(user_password=user_password).document([PdfPage(tuple(lines))])


def page_tree_bomb(count: int) -> bytes:
    """A small file whose page tree claims ``count`` pages: one page object listed ``count``
    times."""
    writer = _Writer()
    page = writer.page_object(PdfPage(("炸弹页",)))
    kids = b" ".join(b"%d 0 R" % page for _ in range(count))
    return writer.finish(kids, count)


def nested_bomb(depth: int) -> bytes:
    """A one-page PDF whose page dictionary holds an array nested ``depth`` levels deep."""
    writer = _Writer()
    page = writer.page_object(PdfPage(("嵌套页",)), extra=b"/Junk " + b"[" * depth + b"]" * depth)
    return writer.finish(b"%d 0 R" % page, 1)


def deflate_bomb(decoded: int, *, lines: Sequence[str] = ("炸弹页",)) -> bytes:
    """A page of ``lines``, then a page whose content stream is ``decoded`` bytes of
    blanks, Flate-compressed (some thousand times smaller)."""
    writer = _Writer()
    first = writer.page_object(PdfPage(tuple(lines)))
    bomb = writer.shared_page(writer.flate_stream(b" ", decoded))
    return writer.finish(b"%d 0 R %d 0 R" % (first, bomb), 2)


def shared_stream_bomb(
    pages: int, decoded: int, *, lines: Sequence[str] = ("共享页",), operator: bytes = b" "
) -> bytes:
    """A page of ``lines``, then ``pages`` pages that all draw one content stream of
    ``decoded`` bytes (``operator`` repeated), Flate-compressed: small on disk, decoded again
    for every page that draws it."""
    writer = _Writer()
    first = writer.page_object(PdfPage(tuple(lines)))
    content = writer.flate_stream(operator, decoded)
    kids = [first] + [writer.shared_page(content) for _ in range(pages)]
    return writer.finish(b" ".join(b"%d 0 R" % kid for kid in kids), len(kids))


def _page(item: Sequence[str] | PdfPage) -> PdfPage:
    return item if isinstance(item, PdfPage) else PdfPage(tuple(item))


def _hex_text(text: str) -> bytes:
    return b"<" + text.encode("utf-16-be").hex().upper().encode() + b">"


def _to_unicode_map() -> bytes:
    # Glyph id = UTF-16 code unit, one range per high byte (a range may not cross one).
    ranges = [b"<%02X00> <%02XFF> <%02X00>" % (high, high, high) for high in range(256)]
    blocks = (ranges[start : start + 100] for start in range(0, len(ranges), 100))
    return (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
        b"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
        b"/CMapName /Identity-UCS def /CMapType 2 def\n"
        b"1 begincodespacerange <0000> <FFFF> endcodespacerange\n"
        + b"".join(
            b"%d beginbfrange\n%s\nendbfrange\n" % (len(block), b"\n".join(block))
            for block in blocks
        )
        + b"endcmap CMapName currentdict /CMap defineresource pop end end\n"
    )


def _rc4(key: bytes, data: bytes) -> bytes:
    state = list(range(256))
    j = 0
    for i in range(256):
        j = (j + state[i] + key[i % len(key)]) % 256
        state[i], state[j] = state[j], state[i]
    out = bytearray()
    i = j = 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + state[i]) % 256
        state[i], state[j] = state[j], state[i]
        out.append(byte ^ state[(state[i] + state[j]) % 256])
    return bytes(out)


def _padded(password: str) -> bytes:
    return (password.encode("latin-1") + _PAD)[:32]


class _Writer:
    """Objects numbered from 1; the catalog is 1, the page tree 2, the font 3."""

    def __init__(self, *, user_password: str | None = None) -> None:
        self._objects: list[bytes] = [b"", b"", b""]
        self._key: bytes | None = None
        self._encrypt: bytes = b""
        if user_password is not None:
            self._encryption(user_password, owner_password="owner")
        to_unicode = self._add_stream(_to_unicode_map())
        descendant = self._add(
            b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /TestSans "
            b"/CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> "
            b"/FontDescriptor %d 0 R /DW 1000 >>" % self._descriptor()
        )
        self._objects[2] = (
            b"<< /Type /Font /Subtype /Type0 /BaseFont /TestSans /Encoding /Identity-H "
            b"/DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>" % (descendant, to_unicode)
        )

    def _descriptor(self) -> int:
        return self._add(
            b"<< /Type /FontDescriptor /FontName /TestSans /Flags 4 "
            b"/FontBBox [0 -200 1000 900] /ItalicAngle 0 /Ascent 880 /Descent -120 "
            b"/CapHeight 700 /StemV 80 >>"
        )

    def _encryption(self, user_password: str, *, owner_password: str) -> None:
        permissions = -4
        owner_key = hashlib.md5(_padded(owner_password)).digest()[:5]
        owner_entry = _rc4(owner_key, _padded(user_password))
        digest = hashlib.md5(
            _padded(user_password)
            + owner_entry
            + permissions.to_bytes(4, "little", signed=True)
            + _FILE_ID
        ).digest()
        self._key = digest[:5]
        user_entry = _rc4(self._key, _PAD)
        self._encrypt = b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P %d >>" % (
            owner_entry.hex().encode(),
            user_entry.hex().encode(),
            permissions,
        )

    def _add(self, body: bytes) -> int:
        self._objects.append(body)
        return len(self._objects)

    def _add_stream(self, data: bytes, header: bytes = b"") -> int:
        number = len(self._objects) + 1
        if self._key is not None:
            object_key = hashlib.md5(
                self._key + number.to_bytes(3, "little") + b"\x00\x00"
            ).digest()[:10]
            data = _rc4(object_key, data)
        return self._add(b"<< %s /Length %d >>\nstream\n%s\nendstream" % (header, len(data), data))

    def flate_stream(self, unit: bytes, size: int) -> int:
        """A Flate-compressed stream of ``unit`` repeated to ``size`` bytes, compressed a
        MiB at a time (the decoded bytes are never held)."""
        chunk = unit * max(1, (1024 * 1024) // len(unit))
        count = max(size // len(chunk), 2)
        # After a full flush the compressor starts afresh, so the same MiB compresses to the
        # same block every time: compressed twice, the second block is repeated, and only
        # the checksum is computed over every MiB.
        packer = zlib.compressobj(9)
        first = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
        block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
        end = packer.flush()[:-4]  # the final (empty) block, without the checksum
        checksum = 1
        for _ in range(count):
            checksum = zlib.adler32(chunk, checksum)
        data = first + block * (count - 1) + end + checksum.to_bytes(4, "big")
        return self._add_stream(data, b"/Filter /FlateDecode")

    def shared_page(self, content: int) -> int:
        """A page that draws the content stream ``content`` (which other pages may draw too)."""
        return self._add(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content
        )

    def page_object(self, page: PdfPage, *, extra: bytes = b"") -> int:
        operations = [b"BT /F1 14 Tf 40 780 Td 20 TL"]
        operations += [_hex_text(line) + b" Tj T*" for line in page.lines]
        operations.append(b"ET")
        resources = b"/Font << /F1 3 0 R >>"
        if page.picture:
            picture = self._add_stream(
                bytes(range(64)),
                b"/Type /XObject /Subtype /Image /Width 8 /Height 8 "
                b"/ColorSpace /DeviceGray /BitsPerComponent 8",
            )
            resources += b" /XObject << /Im1 %d 0 R >>" % picture
            operations.append(b"q 400 0 0 400 100 300 cm /Im1 Do Q")
        content = self._add_stream(b"\n".join(operations))
        return self._add(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << %s >> "
            b"/Contents %d 0 R %s >>" % (resources, content, extra)
        )

    def document(self, pages: Sequence[PdfPage]) -> bytes:
        numbers = [self.page_object(page) for page in pages]
        return self.finish(b" ".join(b"%d 0 R" % number for number in numbers), len(numbers))

    def finish(self, kids: bytes, count: int) -> bytes:
        self._objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
        self._objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count)
        encrypt = self._add(self._encrypt) if self._encrypt else None
        out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for number, body in enumerate(self._objects, start=1):
            offsets.append(len(out))
            out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(self._objects) + 1)
        out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
        trailer = b"/Size %d /Root 1 0 R /ID [<%s> <%s>]" % (
            len(self._objects) + 1,
            _FILE_ID.hex().encode(),
            _FILE_ID.hex().encode(),
        )
        if encrypt is not None:
            trailer += b" /Encrypt %d 0 R" % encrypt
        out += b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref)
        return bytes(out)
