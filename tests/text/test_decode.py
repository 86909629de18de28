from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from external_query_service.text._decode import PRESCAN_BYTES, decode_body, lookup_charset
from tests.support.paths import DATA

PAGES = DATA / "pages"
CHINESE = "滨海大道今日全线通车，湛江市民驱车体验。"


def test_gbk_page_without_charset_decodes_to_chinese() -> None:
    body = (PAGES / "gbk_no_charset.html").read_bytes()
    decoded = decode_body(body)
    assert decoded.encoding == "gb18030"
    assert decoded.declared is None
    assert not decoded.replaced
    assert "滨海大道今日全线通车" in decoded.text
    assert "湛江市海东新区" in decoded.text


def test_meta_charset_gbk_is_read_as_gb18030() -> None:
    decoded = decode_body((PAGES / "gbk_meta_charset.html").read_bytes())
    assert decoded.declared == "gbk"
    assert decoded.encoding == "gb18030"
    assert "本报记者" in decoded.text


def test_http_equiv_content_type_declaration_is_read() -> None:
    body = (
        b'<html><head><meta http-equiv="Content-Type" content="text/html; charset=GB2312">'
        + f"</head><body>{CHINESE}</body></html>".encode("gbk")
    )
    decoded = decode_body(body)
    assert decoded.declared == "gb2312"
    assert CHINESE in decoded.text


def test_header_charset_wins_over_meta_declaration() -> None:
    body = f'<meta charset="utf-8"><p>{CHINESE}</p>'.encode("gbk")
    decoded = decode_body(body, "GBK")
    assert decoded.declared == "gbk"
    assert decoded.encoding == "gb18030"
    assert CHINESE in decoded.text


def test_declared_charset_that_does_not_fit_falls_through_to_utf8() -> None:
    # Declared Shift_JIS, but the body is UTF-8 Chinese that Shift_JIS cannot decode.
    body = f"<p>{CHINESE}</p>".encode()
    decoded = decode_body(body, "shift_jis")
    assert decoded.encoding == "utf-8"
    assert CHINESE in decoded.text


def test_utf8_bom_wins_over_a_declared_charset_and_is_stripped() -> None:
    decoded = decode_body(codecs.BOM_UTF8 + CHINESE.encode(), "gbk")
    assert decoded.encoding == "utf-8"
    assert decoded.text == CHINESE


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_utf16_and_utf32_with_bom_decode(codec: str) -> None:
    body = "\ufeff".encode(codec) + CHINESE.encode(codec)
    decoded = decode_body(body)
    assert decoded.encoding == codec
    assert decoded.text == CHINESE


def test_utf7_declaration_is_ignored() -> None:
    body = b"<p>+ADw-script+AD4-alert(1)+ADw-/script+AD4-</p>"
    decoded = decode_body(body, "utf-7")
    assert decoded.declared == "utf-7"
    assert decoded.encoding != "utf_7"
    assert "<script>" not in decoded.text
    assert "+ADw-script+AD4-" in decoded.text


def test_utf16_declaration_without_bom_is_ignored() -> None:
    body = b"<p>plain ascii page</p>"
    decoded = decode_body(body, "utf-16")
    assert decoded.text == "<p>plain ascii page</p>"


@pytest.mark.parametrize("label", ["unicode_escape", "rot13", "base64", "idna", "no-such-charset"])
def test_python_only_or_unknown_codecs_are_not_accepted_as_charsets(label: str) -> None:
    assert lookup_charset(label) is None
    body = b"<p>caf\\u00e9 \\x41</p>"
    decoded = decode_body(body, label)
    assert decoded.text == "<p>caf\\u00e9 \\x41</p>"


def test_latin1_header_yields_to_a_body_that_is_valid_utf8() -> None:
    body = "<p>Crème brûlée à Zürich</p>".encode()
    decoded = decode_body(body, "ISO-8859-1")
    assert decoded.encoding == "utf-8"
    assert "Crème brûlée" in decoded.text


def test_latin1_header_decodes_a_latin1_page_as_windows_1252() -> None:
    body = "<p>Crème brûlée – 5 €</p>".encode("cp1252")
    decoded = decode_body(body, "iso-8859-1")
    assert decoded.encoding == "cp1252"
    assert decoded.text == "<p>Crème brûlée – 5 €</p>"


def test_meta_declaration_beyond_the_prescan_window_is_not_read() -> None:
    padding = b"<!--" + b"x" * PRESCAN_BYTES + b"-->"
    body = padding + b'<meta charset="koi8-r">' + "<p>Привет</p>".encode("koi8-r")
    decoded = decode_body(body)
    assert decoded.declared is None
    assert "Привет" not in decoded.text


def test_meta_declaration_inside_the_prescan_window_is_read() -> None:
    body = b'<meta charset="koi8-r">' + "<p>Привет</p>".encode("koi8-r")
    decoded = decode_body(body)
    assert decoded.encoding == "koi8_r"
    assert "Привет" in decoded.text


def test_text_plain_body_is_not_scanned_for_meta_declarations() -> None:
    body = b'<meta charset="koi8-r">' + "Привет".encode()
    decoded = decode_body(body, content_type="text/plain")
    assert decoded.declared is None
    assert decoded.text.endswith("Привет")


def test_gbk_body_with_a_stray_byte_keeps_its_chinese() -> None:
    body = CHINESE.encode("gbk") + b"\xff" + CHINESE.encode("gbk")
    decoded = decode_body(body)
    assert decoded.replaced
    assert decoded.encoding == "gb18030"
    assert decoded.text.count(CHINESE) == 2


def test_invalid_bytes_are_replaced_and_flagged() -> None:
    body = b"ok " + b"\xc3\x28\xa0\xa1\xff\xfe\xfd"
    decoded = decode_body(body)
    assert decoded.replaced
    assert "\ufffd" in decoded.text
    assert decoded.text.startswith("ok ")


def test_unclosed_meta_tags_in_the_head_are_scanned_without_trouble() -> None:
    body = b"<meta " * (PRESCAN_BYTES // 6) + b"<p>ascii</p>"
    decoded = decode_body(body)
    assert decoded.declared is None
    assert decoded.text.endswith("<p>ascii</p>")


@given(
    body=st.binary(max_size=512),
    label=st.sampled_from([None, "utf-8", "gbk", "utf-7", "utf-16", "latin1", "bogus", ""]),
    content_type=st.sampled_from(["text/html", "text/plain", "application/xhtml+xml"]),
)
def test_decode_body_never_raises_on_any_bytes(
    body: bytes, label: str | None, content_type: str
) -> None:
    decoded = decode_body(body, label, content_type=content_type)
    if not decoded.replaced:
        # A strict decode is lossless: the text encodes back to the body (after any BOM).
        assert body.endswith(decoded.text.encode(decoded.encoding))


def test_content_type_with_parameters_still_counts_as_html() -> None:
    body = b'<meta charset="gbk"><p>' + CHINESE.encode("gbk") + b"</p>"
    decoded = decode_body(body, content_type="text/html; charset=whatever")
    assert decoded.declared == "gbk"
    assert CHINESE in decoded.text
