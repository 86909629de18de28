"""The answer bundle's form: content-addressed, versioned, bounded, signed only with a key."""

from __future__ import annotations

import json

import pytest

from external_query_service import InputError, SettingsError
from external_query_service._bundle import (
    BUNDLE_SCHEMA,
    MAX_BUNDLE_BYTES,
    bundle_secret,
    make_bundle,
    read_bundle,
)
from external_query_service._canonical import canonical_json, content_id
from external_query_service.testing import World
from tests.support.bundles import answer_airshow


def test_a_bundles_id_is_the_digest_of_its_canonical_form_and_the_text_is_that_form(
    world: World,
) -> None:
    answered = answer_airshow(world)
    record = json.loads(answered.bundle)

    bundle_id = record.pop("bundle_id")

    assert bundle_id == content_id(record)
    assert record["schema_version"] == BUNDLE_SCHEMA == "external_query_bundle_v1"
    assert record["hash_contract"] == "rfc8785-sha256/v0"
    assert answered.bundle == canonical_json({**record, "bundle_id": bundle_id}).decode()


def test_a_bundle_holds_the_run_and_each_quote_where_it_sits(world: World) -> None:
    answered = answer_airshow(world)
    answer = answered.answer
    record = json.loads(answered.bundle)
    (evidence,) = answer.evidence
    (source,) = record["sources"]

    assert record["question"] == answer.plan.question
    assert record["admission"]["plan_ids"] == list(answer.admission.plan_ids)
    assert record["admission"]["receipt_digests"] == list(answer.admission.receipt_digests)
    assert (record["status"], record["text"]) == (answer.status, answer.text)
    assert source["quote"] == evidence.snippet
    assert (source["offset"], source["length"]) == (evidence.offset, len(evidence.snippet))
    assert (source["raw_digest"], source["text_digest"]) == (
        evidence.raw_digest,
        evidence.content_digest,
    )
    assert source["reader"] == {
        "name": "html_main_text",
        "version": "0.1.0",
        "query": answer.plan.question,
    }
    assert {check["check"] for check in source["checks"]} >= {"origin", "time"}
    source_id = source.pop("source_id")
    assert source_id == content_id(source)


def test_a_bundle_holds_quotes_not_pages(world: World) -> None:
    answered = answer_airshow(world)
    page = world.requests_to("/airshow")[0]
    assert page is not None
    assert len(answered.bundle.encode()) < 4096
    assert "<html" not in answered.bundle
    assert "<nav" not in answered.bundle


def test_no_float_enters_a_bundle() -> None:
    with pytest.raises(InputError) as caught:
        make_bundle(
            {
                "plan": {"question": "q", "score": 0.5},
                "verifier": {"checks": []},
                "admission": {
                    "request_id": "r",
                    "plan_ids": [],
                    "receipt_digests": [],
                    "admission_ids": [],
                },
                "status": "insufficient_evidence",
                "reason": "no_matching_evidence",
                "retryable": False,
                "answer_contract": "summary_with_sources",
                "text": "",
                "evidence": [],
            }
        )
    assert getattr(caught.value, "reason", None) == "float_in_hashed_record"


def test_a_bundle_over_the_bound_is_refused_unread() -> None:
    with pytest.raises(InputError, match="at most"):
        read_bundle(b" " * (MAX_BUNDLE_BYTES + 1))


def test_a_named_signing_variable_that_is_unset_is_a_settings_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EQ_TEST_UNSET_KEY", raising=False)
    assert bundle_secret(None) is None
    with pytest.raises(SettingsError, match="EQ_TEST_UNSET_KEY"):
        bundle_secret("EQ_TEST_UNSET_KEY")


def test_a_signed_bundle_holds_a_tag_never_the_secret_and_unsigned_reads_as_absent(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EQ_TEST_BUNDLE_KEY", "s3cret-value")
    answered = answer_airshow(world, bundle={"signing_key_env": "EQ_TEST_BUNDLE_KEY"})
    assert "s3cret-value" not in answered.bundle
    assert len(json.loads(answered.bundle)["signature"]["value"]) == 64
    unsigned = answered.answer.bundle()
    assert "signature" not in json.loads(unsigned)
    assert read_bundle(unsigned).signature == "absent"
    # The signature is not hashed: signing leaves the id as it was.
    assert json.loads(unsigned)["bundle_id"] == json.loads(answered.bundle)["bundle_id"]
