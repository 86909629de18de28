"""The credential check: a key found in every form a reader or a program turns back into it."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from external_query_service.text._credentials import repeats_credential

KEY = "brv-KEY-7d1f0c55e2"
RAW = KEY.encode()


@pytest.mark.parametrize(
    "echo",
    [
        pytest.param(f"https://x.example/a?k={KEY}", id="plain"),
        pytest.param("".join(f"%25{b:02X}" for b in RAW), id="percent-encoded-twice"),
        pytest.param(quote(quote(quote("".join(f"%{b:02X}" for b in RAW)))), id="percent-four"),
        pytest.param("".join(f"&#x{b:x};" for b in RAW), id="html-entities"),
        pytest.param("".join(f"&amp;#{b};" for b in RAW), id="html-entities-escaped"),
        pytest.param(base64.b64encode(RAW).decode(), id="base64"),
        pytest.param(base64.b64encode(b"a" + RAW + b"z").decode(), id="base64-offset-1"),
        pytest.param(base64.b64encode(b"ab" + RAW).decode(), id="base64-offset-2"),
        pytest.param(base64.urlsafe_b64encode(b"\xfb\xff" + RAW).decode(), id="url-safe-base64"),
        pytest.param(
            "/p/" + quote(base64.b64encode(b"k=" + RAW).decode(), safe=""), id="base64-in-path"
        ),
        pytest.param("\u200b".join(KEY), id="zero-width-split"),
        pytest.param(quote("&#8203;".join(KEY)), id="split-by-encoded-zero-width"),
        pytest.param("".join(chr(ord(c) + 0xFEE0) for c in KEY), id="full-width"),
    ],
)
def test_a_key_is_found_in_every_encoding_of_it(echo: str) -> None:
    assert repeats_credential([echo], [KEY])


def test_a_text_without_the_key_is_not_taken_for_it() -> None:
    texts = [
        "https://port-news.example.cn/throughput?page=2&q=%E6%B9%9B%E6%B1%9F",
        base64.b64encode(b"brv-KEY-7d1f0c55e3").decode(),  # one byte off
        "brv-KEY-7d1f0c55 e2",
        "&#98;&#114;&#118;-KEY",
    ]
    assert not repeats_credential(texts, [KEY])
    assert not repeats_credential([KEY], ["", ""])
