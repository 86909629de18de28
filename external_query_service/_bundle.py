"""The answer bundle: one JSON document that lets anyone check an answer again later.

A bundle holds the question, the plan, the admission's plan ids and receipt digests (one per
adapter attempt), the outcome and text, and for every quoted evidence: the URL it was asked
for and the URL its body came from after redirects, when it was fetched, the raw body's
digest, the extracted text's digest, the quoted words exactly as the answer's evidence holds
them, where they sit (offset and length in the extracted text; the page of a PDF), the
reader that extracted them (name, version, and the query it read for: the main-text reading
depends on it) and the verifier's checks of that evidence. Quotes, never pages: a bundle is
bounded (``MAX_BUNDLE_BYTES``).

Content addressing (the package's one canonical-JSON helper, ``_canonical``): each source
carries ``source_id``, the digest of its own record without that field, and the bundle's
``bundle_id`` is the digest of the whole record without ``bundle_id`` and ``signature``. An
edit to a quote, a URL or the status changes a digest that no longer matches. No floats
enter a hashed record, as in every admission record. Somebody who recomputes every digest
after editing is caught only by a signature: with ``[bundle] signing_key_env`` naming an
environment variable that holds a secret, ``signature`` is HMAC-SHA256 over the bundle's
canonical bytes (``bundle_id`` included) with a key derived from the secret, as the shared
cache derives its keys. The bundle never holds the secret, a settings value or a provider
credential: it is built from the answer alone.

This module reads and writes bundles; checking one against the pages it cites is
``bundle/`` (``verify_bundle``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import JsonValue, ValidationError

from ._canonical import HASH_CONTRACT, canonical_json, content_id, loads_record
from ._frozen import Frozen
from ._version import __version__
from .errors import InputError, SettingsError

__all__ = [
    "BUNDLE_SCHEMA",
    "MAX_BUNDLE_BYTES",
    "SIGNATURE_ALGORITHM",
    "AnswerBundle",
    "BundleAdmission",
    "BundleCheck",
    "BundleReader",
    "BundleSignature",
    "BundleSource",
    "ReadBundle",
    "bundle_secret",
    "make_bundle",
    "read_bundle",
    "source_page",
]

#: The schema's name and version; a change to any field is a new version.
BUNDLE_SCHEMA: Final = "external_query_bundle_v1"
#: The largest bundle read (and written): quotes and checks, never page bodies, stay far
#: below it (a ten-source answer is some 20 KB).
MAX_BUNDLE_BYTES: Final = 1024 * 1024
SIGNATURE_ALGORITHM: Final = "hmac-sha256"
_SIGN = b"external-query answer bundle: signing key v1"


class BundleReader(Frozen):
    """What extracted a quote's text: ``name`` (``html_main_text``, ``pdf_text``,
    ``browser_main_text``, or the evidence's basis for text no page reading made), the
    package ``version``, and the ``query`` the main-text reading was made for."""

    name: str
    version: str
    query: str


class BundleCheck(Frozen):
    """One of the verifier's checks of a quoted evidence."""

    check: str
    passed: bool
    reason: str
    detail: str = ""


class BundleSource(Frozen):
    """One quoted evidence. ``url`` is the source's URL as it was asked for (a search
    result's), ``final_url`` the address its body came from after redirects (the two are
    the same without one); ``page`` is the PDF page the quote is on (else None)."""

    source_id: str
    evidence_id: str
    adapter_id: str
    basis: str
    url: str
    final_url: str
    site: str
    title: str
    fetched_at: str
    raw_digest: str
    text_digest: str
    quote: str
    offset: int
    length: int
    page: int | None
    reader: BundleReader
    checks: tuple[BundleCheck, ...]


class BundleAdmission(Frozen):
    """The admission contract's ids for the run (``docs/architecture/admission.md``)."""

    request_id: str
    plan_ids: tuple[str, ...]
    receipt_digests: tuple[str, ...]
    admission_ids: tuple[str, ...]


class BundleSignature(Frozen):
    """``value``: the hex HMAC-SHA256 tag; never the key."""

    algorithm: Literal["hmac-sha256"]
    value: str


class AnswerBundle(Frozen):
    """The bundle's schema (``BUNDLE_SCHEMA``); every field but ``signature`` is hashed."""

    schema_version: Literal["external_query_bundle_v1"]
    hash_contract: Literal["rfc8785-sha256/v0"]
    bundle_id: str
    created_by: dict[str, str]
    question: str
    plan: dict[str, JsonValue]
    status: str
    reason: str | None
    retryable: bool
    answer_contract: str
    text: str
    admission: BundleAdmission
    sources: tuple[BundleSource, ...]
    signature: BundleSignature | None = None


class ReadBundle(Frozen):
    """A bundle as read, and what its own bytes prove: ``id_holds`` (the id is the digest of
    the record), the sources whose ``source_id`` does not match (``tampered_sources``), and
    the signature (``valid``, ``invalid``, ``absent``, or ``unchecked``: signed, but no key
    configured here)."""

    bundle: AnswerBundle
    id_holds: bool
    tampered_sources: tuple[str, ...]
    signature: Literal["valid", "invalid", "absent", "unchecked"]


def source_page(url: str) -> int | None:
    """The page a ``#page=N`` locator names (``adapters`` cite PDF pages so); else None."""
    _, _, fragment = url.partition("#")
    number = fragment.removeprefix("page=")
    if fragment.startswith("page=") and number.isdigit():
        return int(number)
    return None


def bundle_secret(variable: str | None, environ: Mapping[str, str] | None = None) -> bytes | None:
    """The signing key derived from the secret in ``variable`` (``[bundle]
    signing_key_env``); None when no variable is named. A named variable that is empty or
    unset is a ``SettingsError``: a bundle the caller wants signed is never silently not."""
    if not variable:
        return None
    value = (os.environ if environ is None else environ).get(variable, "").strip()
    if not value:
        raise SettingsError(f"[bundle] signing_key_env: ${variable} is empty or unset")
    return hmac.new(value.encode("utf-8"), _SIGN, hashlib.sha256).digest()


def _tag(key: bytes, record: Mapping[str, Any]) -> str:
    return hmac.new(key, canonical_json(record), hashlib.sha256).hexdigest()


def _reader(evidence: Mapping[str, Any], page: int | None, question: str) -> dict[str, str]:
    basis = str(evidence["basis"])
    if basis != "page_body":
        name = basis
    elif evidence.get("rendered_by") == "browser":
        name = "browser_main_text"
    else:
        name = "html_main_text" if page is None else "pdf_text"
    query = evidence.get("gathered_for") or question  # what the page reading was made for
    return {"name": name, "version": __version__, "query": str(query)}


def _source(
    evidence: Mapping[str, Any], checks: list[Mapping[str, Any]], question: str
) -> dict[str, Any]:
    cited = str(evidence["url"])
    page = source_page(cited)
    final_url = cited.split("#", 1)[0] if page is not None else cited
    record: dict[str, Any] = {
        "evidence_id": evidence["evidence_id"],
        "adapter_id": evidence["adapter_id"],
        "basis": evidence["basis"],
        "url": evidence.get("requested_url") or final_url,
        "final_url": final_url,
        "site": evidence["site"],
        "title": evidence["title"],
        "fetched_at": evidence["accessed_at"],
        "raw_digest": evidence["raw_digest"],
        "text_digest": evidence["content_digest"],
        "quote": evidence["snippet"],
        "offset": evidence["offset"],
        "length": evidence["length"],
        "page": page,
        "reader": _reader(evidence, page, question),
        "checks": [
            {
                "check": check["check"],
                "passed": check["passed"],
                "reason": check["reason"],
                "detail": check.get("detail", ""),
            }
            for check in checks
            if check.get("evidence_id") == evidence["evidence_id"]
        ],
    }
    return {"source_id": content_id(record), **record}


def make_bundle(answer: Mapping[str, Any], *, signing_key: bytes | None = None) -> str:
    """The bundle of ``answer`` (an ``ExternalAnswer`` as ``model_dump(mode="json")`` gives
    it) as JSON text, signed with ``signing_key`` (``bundle_secret``) when given."""
    plan = answer["plan"]
    question = str(plan["question"])
    checks = list(answer["verifier"]["checks"])
    admission = answer["admission"]
    record: dict[str, Any] = {
        "schema_version": BUNDLE_SCHEMA,
        "hash_contract": HASH_CONTRACT,
        "created_by": {"name": "external_query_service", "version": __version__},
        "question": question,
        "plan": plan,
        "status": answer["status"],
        "reason": answer["reason"],
        "retryable": answer["retryable"],
        "answer_contract": answer["answer_contract"],
        "text": answer["text"],
        "admission": {
            key: admission[key]
            for key in ("request_id", "plan_ids", "receipt_digests", "admission_ids")
        },
        "sources": [_source(item, checks, question) for item in answer["evidence"]],
    }
    record["bundle_id"] = content_id(record)
    if signing_key is not None:
        record["signature"] = {
            "algorithm": SIGNATURE_ALGORITHM,
            "value": _tag(signing_key, record),
        }
    AnswerBundle.model_validate(record)  # what we write, we can read
    text = canonical_json(record).decode("utf-8")
    if len(text.encode("utf-8")) > MAX_BUNDLE_BYTES:
        raise InputError(f"the answer's bundle is over {MAX_BUNDLE_BYTES} bytes")
    return text


def read_bundle(text: str | bytes, *, signing_key: bytes | None = None) -> ReadBundle:
    """Read a bundle and recompute what its own bytes prove (``ReadBundle``). Text that is
    not a bundle of this schema is an ``InputError`` (JSON that cannot be read: an
    ``EvidenceInputError`` with its reason); an edited bundle is not: it reads, and says
    so."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if len(raw) > MAX_BUNDLE_BYTES:
        raise InputError(f"a bundle is at most {MAX_BUNDLE_BYTES} bytes, not {len(raw)}")
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("a bundle is UTF-8 JSON text") from None
    record = loads_record(decoded, origin="bundle")  # floats, duplicate keys: refused
    if record.get("schema_version") != BUNDLE_SCHEMA:
        raise InputError(f"not an answer bundle: schema_version is not {BUNDLE_SCHEMA}")
    try:
        bundle = AnswerBundle.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"not a readable answer bundle: {where}: {first['msg']}") from None
    hashed = {key: value for key, value in record.items() if key not in ("bundle_id", "signature")}
    sources = record["sources"]
    assert isinstance(sources, list)  # the schema has just said so
    tampered = tuple(
        str(item["evidence_id"])
        for item in sources
        if isinstance(item, dict) and not _source_holds(item)
    )
    signed = {key: value for key, value in record.items() if key != "signature"}
    return ReadBundle(
        bundle=bundle,
        id_holds=content_id(hashed) == bundle.bundle_id,
        tampered_sources=tampered,
        signature=_signature(bundle.signature, signing_key, signed),
    )


def _source_holds(item: Mapping[str, Any]) -> bool:
    record = {key: value for key, value in item.items() if key != "source_id"}
    return bool(content_id(record) == item["source_id"])


def _signature(
    signature: BundleSignature | None, key: bytes | None, signed: Mapping[str, Any]
) -> Literal["valid", "invalid", "absent", "unchecked"]:
    if signature is None:
        return "absent"
    if key is None:
        return "unchecked"
    return "valid" if hmac.compare_digest(_tag(key, signed), signature.value) else "invalid"
