"""Keeping secrets out of recorded worlds.

A recording never stores request headers, adapter options other than endpoint URLs, or the
``[llm]`` section. What could still carry a secret (a URL's userinfo or ``apikey=``
parameter, a body that echoes a key) is redacted, and the written world is scanned for
every secret value the live settings and environment hold before the recording counts as
done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from ..errors import InputError
from ..settings import Settings

__all__ = [
    "REDACTED",
    "SECRET_PARAMS",
    "assert_no_secrets",
    "is_secret_name",
    "redact_url",
    "scrub",
    "secret_values",
]

REDACTED = "REDACTED"
#: Query parameters and option keys whose values are credentials.
SECRET_PARAMS = frozenset(
    {
        "apikey",
        "api_key",
        "key",
        "token",
        "access_token",
        "auth",
        "authorization",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "signature",
        "sig",
        "subscription_key",
        "x_api_key",
    }
)
_SECRET_SUFFIXES = ("_key", "apikey", "token", "secret", "password", "passwd", "signature")
#: Shorter values are not scrubbed from bodies: replacing "ab" everywhere would wreck pages.
_MIN_SECRET_LENGTH = 6


def is_secret_name(name: str) -> bool:
    """``apikey``, ``access_token``, ``client_secret``... (not ``author`` or ``keyword``)."""
    lowered = name.lower().replace("-", "_")
    return lowered in SECRET_PARAMS or lowered.endswith(_SECRET_SUFFIXES)


def redact_url(url: str) -> str:
    """``url`` without userinfo and with secret-named query values replaced by REDACTED."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return url
    if parsed.userinfo:
        parsed = parsed.copy_with(username=None, password=None)
    if not any(is_secret_name(key) for key in parsed.params):
        return str(parsed)
    pairs = [
        (key, REDACTED if is_secret_name(key) else value)
        for key, value in parsed.params.multi_items()
    ]
    return str(parsed.copy_with(query=urlencode(pairs).encode("ascii")))


def _walk(value: Any, secret_key: bool, environ: Mapping[str, str]) -> Iterable[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            name = str(key)
            if name.lower().endswith("_env") and isinstance(item, str) and environ.get(item):
                yield environ[item]
            yield from _walk(item, secret_key or is_secret_name(name), environ)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk(item, secret_key, environ)
    elif isinstance(value, str) and secret_key:
        yield value


def _url_secrets(url: str | None) -> Iterable[str]:
    if not url:
        return
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return
    if parsed.password:
        yield parsed.password
    for key, value in parsed.params.multi_items():
        if is_secret_name(key):
            yield value


def secret_values(settings: Settings, environ: Mapping[str, str]) -> frozenset[str]:
    """Every secret the live settings name or point at (long enough to scrub safely)."""
    found: list[str] = []
    if settings.llm is not None:
        if settings.llm.api_key_env and environ.get(settings.llm.api_key_env):
            found.append(environ[settings.llm.api_key_env])
        found.extend(_url_secrets(settings.llm.base_url))
    for adapter in settings.adapters:
        # The adapter's own keys as written: secret-named ones, ``*_env`` variables, and
        # credentials inside any URL-valued key.
        values = adapter.option_values
        found.extend(_walk(values, False, environ))
        for value in values.values():
            if isinstance(value, str):
                found.extend(_url_secrets(value))
    return frozenset(value for value in found if len(value) >= _MIN_SECRET_LENGTH)


def _forms(secret: str) -> list[bytes]:
    return sorted({secret.encode("utf-8"), quote(secret, safe="").encode("ascii")}, key=len)[::-1]


def scrub(data: bytes, secrets: Iterable[str]) -> bytes:
    """``data`` with every secret (plain or percent-encoded) replaced by REDACTED."""
    for secret in secrets:
        for form in _forms(secret):
            data = data.replace(form, REDACTED.encode("ascii"))
    return data


def assert_no_secrets(directory: Path, secrets: Iterable[str]) -> None:
    """Raise ``InputError`` naming the file if any secret appears anywhere under
    ``directory`` (the value itself is never printed)."""
    forms = [form for secret in secrets for form in _forms(secret)]
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if any(form in data for form in forms):
                raise InputError(f"{path}: a secret from the live settings reached the world")
