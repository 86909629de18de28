"""Signed shared entries: what one process writes to the shared cache, another can trust.

Anyone who can write to Redis could otherwise plant evidence: a forged page body or page
analysis would be quoted as verified. With ``[cache] signing_key_env`` naming an
environment variable that holds a secret, every value written to the shared cache carries
an HMAC-SHA256 tag over its exact bytes and the Redis key it is stored under (so a genuine
entry cannot be moved to another key either); a value whose tag does not verify is
dropped and counted, and the caller fetches or computes again.

Two keys are derived from the secret with HMAC-SHA256 (a keyed hash), one per use:

- the *signing key* tags values;
- the *naming key* turns the callers' names (digests of URLs, say) into Redis key names,
  so nobody without the secret can compute where an entry will live and plant one there
  before the URL is ever fetched.

Rotation: ``signing_key_previous_env`` names the secret being retired. Entries it signed
are still read (under the names it derived), never written; once every entry it wrote has
expired (at most a day for analyses), the variable can go.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import SettingsError
from ..settings import CacheSettings

__all__ = ["TAG_BYTES", "EntrySigner", "SigningKey", "entry_signer"]

_log = logging.getLogger("external_query_service.storage")

#: Bytes of a tag (HMAC-SHA256), stored in front of the value it seals.
TAG_BYTES = 32
_SIGN = b"external-query shared cache: signing key v1"
_NAME = b"external-query shared cache: naming key v1"


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return hmac.new(secret, purpose, hashlib.sha256).digest()


@dataclass(frozen=True, repr=False)
class SigningKey:
    """One secret's two derived keys (never the secret itself). ``repr`` shows nothing."""

    sign: bytes
    name: bytes

    @classmethod
    def from_secret(cls, secret: str) -> SigningKey:
        """The two keys derived from ``secret`` (HMAC-SHA256, one purpose string each)."""
        raw = secret.encode("utf-8")
        return cls(sign=_derive(raw, _SIGN), name=_derive(raw, _NAME))

    def key_name(self, name: str) -> str:
        """The Redis key name for the caller's ``name``."""
        return hmac.new(self.name, name.encode("utf-8"), hashlib.sha256).hexdigest()

    def tag(self, key: str, *parts: bytes) -> bytes:
        """The tag over ``key`` and ``parts``, each length-prefixed (no two splits of the
        same bytes tag alike)."""
        mac = hmac.new(self.sign, digestmod=hashlib.sha256)
        for piece in (key.encode("utf-8"), *parts):
            mac.update(len(piece).to_bytes(8, "big"))
            mac.update(piece)
        return mac.digest()


class EntrySigner:
    """Seals and opens shared values with the current key; opens with the previous one."""

    def __init__(self, current: SigningKey, previous: SigningKey | None = None) -> None:
        self._current = current
        self._previous = previous

    def names(self, name: str) -> tuple[str, ...]:
        """Where ``name`` lives: under the current key's naming first, then the previous."""
        found = [self._current.key_name(name)]
        if self._previous is not None:
            found.append(self._previous.key_name(name))
        return tuple(found)

    def seal(self, key: str, *parts: bytes) -> bytes:
        """The current key's tag for the value ``parts`` stored under ``key``."""
        return self._current.tag(key, *parts)

    def opens(self, key: str, tag: bytes, *parts: bytes) -> bool:
        """Does ``tag`` seal ``parts`` under ``key`` with the current or previous key?
        (Compared in constant time.)"""
        keys = (self._current,) if self._previous is None else (self._current, self._previous)
        return any(hmac.compare_digest(tag, key_.tag(key, *parts)) for key_ in keys)


def entry_signer(settings: CacheSettings, environ: Mapping[str, str]) -> EntrySigner | None:
    """The signer ``[cache]`` configures, or None when ``allow_unsigned`` lets the shared
    cache run without one (said once, as a warning).

    ``SettingsError`` (raised while the service is built, before anything is read from the
    cache) when no signing key is configured and ``allow_unsigned`` is not set; when the
    variable ``signing_key_env`` names is unset or empty, whatever ``allow_unsigned`` says
    (a deployment that named a key meant to sign); or when a variable is named for the
    previous key without a key for the current one.
    """
    current = _secret(environ, settings.signing_key_env)
    previous = _secret(environ, settings.signing_key_previous_env)
    if current is None:
        named = settings.signing_key_env
        if named:
            raise SettingsError(
                f"[cache] signing_key_env: ${named} is empty or unset: no key to sign entries"
            )
        if previous is not None:
            raise SettingsError(
                "[cache] signing_key_previous_env is set but signing_key_env gives no key"
            )
        if settings.require_signing or not settings.allow_unsigned:
            raise SettingsError(
                "[cache] url without a signing key: anyone who can write to the shared cache "
                "could plant evidence (set [cache] signing_key_env, or allow_unsigned = true)"
            )
        _log.warning(
            "shared cache entries are not signed: anyone who can write to %s can plant "
            "entries ([cache] allow_unsigned)",
            settings.key_prefix,
        )
        return None
    return EntrySigner(
        SigningKey.from_secret(current),
        SigningKey.from_secret(previous) if previous is not None else None,
    )


def _secret(environ: Mapping[str, str], variable: str | None) -> str | None:
    if not variable:
        return None
    value = environ.get(variable, "").strip()
    return value or None
