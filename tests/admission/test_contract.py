"""The pure contract: discover → plan → receipt → admit → readback → retire, and every
way it says no (each with a named reason)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from external_query_service.admission import (
    ContractRejected,
    DownstreamSource,
    EvidenceInputError,
    EvidencePlan,
    build_plan,
    build_request,
    check_receipt,
    content_id,
    decide,
    discover,
    parse_inventory,
    parse_receipt,
    plan_id_of,
    project,
    receipt_digest,
    registry_rows,
    render,
    retire,
    verify_admission,
    verify_plan,
)
from tests.support.world import ORIGINAL_SOURCE, receipt_for
from tests.support.world import provider_row as row
from tests.support.world import receipt_source as source

SOURCE_A = ORIGINAL_SOURCE
SOURCE_B = "https://docs.example.org/page"


def make_plan(**overrides: Any) -> dict[str, Any]:
    inventory = overrides.pop("inventory", {"providers": [row()]})
    request = build_request(
        overrides.pop("objective", "Compare current behavior"),
        "Choose an implementation",
        "Whether to adopt it",
        overrides.pop("kinds", ["current_behavior", "counterexample"]),
    )
    plan = build_plan(request, parse_inventory(inventory), **overrides)
    return json.loads(plan.model_dump_json())


def make_receipt(plan: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    sources = [source(SOURCE_A), source(SOURCE_B, content_digest="sha256:" + "cd" * 32)]
    return receipt_for(plan, overrides.pop("sources", sources), **overrides)


@contextmanager
def rejected(reason: str) -> Iterator[Any]:
    with pytest.raises(ContractRejected) as caught:
        yield caught
    assert caught.value.reason == reason, str(caught.value)


# -- golden ids ----------------------------------------------------------------------------


def test_golden_ids_are_pinned() -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = decide(
        plan, receipt, decision="admit", reason="Direct source", admit_sources=[SOURCE_A]
    )
    assert plan["request"]["request_id"] == (
        "sha256:840c1ce47d65ab614311f9330a541a03742f0e13bb8c712c02ec3f7b900ce8fd"
    )
    assert plan["plan_id"] == GOLDEN_PLAN_ID
    assert check_receipt(plan, receipt).receipt_digest == GOLDEN_RECEIPT_DIGEST
    assert receipt_digest(parse_receipt(receipt)) == GOLDEN_RECEIPT_DIGEST
    assert admission.admission_id == GOLDEN_ADMISSION_ID


GOLDEN_PLAN_ID = "sha256:f8e1ea1a32871c62606f2dda0568a15a4079da4431b8fab7d6355b419cdb70a5"
GOLDEN_RECEIPT_DIGEST = "sha256:e8c8c7b1c2ac58992bd28e7903be5ce696762f66237e6006d86d6df9433c85e8"
GOLDEN_ADMISSION_ID = "sha256:7273b6ca64f12bd491048028c47c75eb0d12c5c810cd31f01d23527b605feb79"


# -- round trip ----------------------------------------------------------------------------


def test_round_trip_from_discovery_to_retirement() -> None:
    inventory = discover(
        registry_rows([("connector:docs", "connector")]),
        parse_inventory({"providers": [row()]}),
    )
    assert [item.provider_id for item in inventory.ready] == ["connector:docs"]
    request = build_request("Compare current behavior", "Choose", "Whether", ["current_behavior"])
    plan = json.loads(build_plan(request, inventory.providers).model_dump_json())
    receipt = make_receipt(plan)

    observation = check_receipt(plan, receipt)
    assert (observation.execution_attested, observation.admitted) == (False, False)
    assert observation.evidence_coverage_claimed is False

    admission = decide(plan, receipt, decision="admit", reason="Direct", admit_sources=[SOURCE_A])
    assert admission.admitted_source_refs == (SOURCE_A,)
    assert admission.receipt_digest == observation.receipt_digest

    readback = project(plan, receipt, admission)
    assert [(item.source_ref, item.admitted) for item in readback.sources] == [
        (SOURCE_A, True),
        (SOURCE_B, False),
    ]
    assert readback.retirement is not None
    assert readback.retirement.state == "retained"

    again = json.loads(admission.model_dump_json())
    assert retire(again, []).state == "retained"
    done = retire(again, [SOURCE_A])
    assert (done.ready, done.state, done.missing_source_refs) == (True, "retired", ())


def test_ids_do_not_change_when_the_same_inputs_are_given_in_another_order() -> None:
    first = make_plan(kinds=["current_behavior", "counterexample"])
    second = make_plan(kinds=["counterexample", "current_behavior", "counterexample"])
    assert first["plan_id"] == second["plan_id"]
    spaced = make_plan(objective="  Compare   current behavior ")
    assert spaced["plan_id"] == first["plan_id"]


def test_plan_output_is_its_own_input() -> None:
    plan = make_plan()
    assert verify_plan(plan).plan_id == plan["plan_id"]


# -- discover ------------------------------------------------------------------------------


def test_registry_presence_is_projected_not_ready_even_when_it_claims_ready() -> None:
    rows = parse_inventory({"providers": [row(observed_by="registry")]})
    assert rows[0].ready is False
    assert rows[0].unavailable_reason == "projected_not_ready:registry_presence_is_not_readiness"
    assert registry_rows([("connector:x", "connector")])[0].ready is False


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"enabled": False}, "projected_not_ready:not_enabled"),
        ({"installed": False}, "projected_not_ready:not_installed"),
        ({"protocol": "other_v1"}, "projected_not_ready:unsupported_protocol"),
        ({"ready": False, "unavailable_reason": "login wall"}, "login wall"),
        ({"ready": False}, "not_ready"),
    ],
)
def test_a_row_missing_a_lifecycle_step_is_not_ready_and_says_why(
    overrides: dict[str, Any], reason: str
) -> None:
    (projected,) = parse_inventory({"providers": [row(**overrides)]})
    assert (projected.ready, projected.unavailable_reason) == (False, reason)


def test_a_bare_providers_array_is_a_named_input_error() -> None:
    with pytest.raises(EvidenceInputError) as caught:
        parse_inventory([row()])
    assert caught.value.reason == "bare_providers_array"


@pytest.mark.parametrize(
    ("inventory", "reason"),
    [
        ({"providers": [row(), row()]}, "duplicate_provider_id"),
        ({"providers": "x"}, "invalid_inventory"),
        ({"providers": [row(ready="yes")]}, "invalid_inventory"),
        ({"providers": [row(extra=1)]}, "invalid_inventory"),
        ({"rows": []}, "invalid_inventory"),
    ],
)
def test_malformed_inventories_are_rejected(inventory: Any, reason: str) -> None:
    with rejected(reason):
        parse_inventory(inventory)


# -- plan ----------------------------------------------------------------------------------


def test_two_ready_providers_need_a_preferred_id() -> None:
    inventory = {"providers": [row("connector:a"), row("connector:b")]}
    with rejected("several_ready_providers"):
        make_plan(inventory=inventory)
    plan = make_plan(inventory=inventory, preferred_provider_id="connector:b")
    assert plan["selected_provider"] == {
        "provider_id": "connector:b",
        "provider_kind": "connector",
        "selected_by": "preferred",
    }


@pytest.mark.parametrize(
    ("inventory", "preferred", "reason"),
    [
        ({"providers": [row(enabled=False)]}, None, "no_ready_provider"),
        (
            {"providers": [row(enabled=False)]},
            "connector:docs",
            "preferred_provider_not_ready",
        ),
        ({"providers": [row()]}, "connector:other", "preferred_provider_unknown"),
    ],
)
def test_plan_binds_only_a_ready_provider(
    inventory: dict[str, Any], preferred: str | None, reason: str
) -> None:
    with rejected(reason):
        make_plan(inventory=inventory, preferred_provider_id=preferred)


def test_an_empty_objective_or_no_evidence_kind_is_rejected() -> None:
    with rejected("empty_objective"):
        build_request("  ", "a", "b", ["k"])
    with rejected("missing_evidence_kind"):
        build_request("o", "a", "b", [" "])


def test_a_plan_with_a_float_in_its_envelope_is_refused() -> None:
    request = build_request("o", "a", "b", ["k"])
    with rejected("float_in_hashed_record"):
        build_plan(request, parse_inventory({"providers": [row()]}), envelope={"score": 0.5})


def test_a_plan_edited_after_hashing_is_tampered() -> None:
    plan = make_plan()
    plan["request"]["objective"] = "Something else"
    with rejected("request_tampered"):
        verify_plan(plan)
    plan = make_plan()
    plan["envelope"]["executed_by"] = "someone"
    with rejected("plan_tampered"):
        verify_plan(plan)


def _set(data: Any, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    data[int(last) if isinstance(data, list) else last] = value


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("request.objective", "Another objective", "request_tampered"),
        ("request.user_activity", "Another activity", "request_tampered"),
        ("request.decision", "Another decision", "request_tampered"),
        ("request.evidence_kinds", ["current_behavior"], "request_tampered"),
        ("request.request_id", "sha256:" + "3" * 64, "request_tampered"),
        ("candidates.0.enabled", False, "ready_without_lifecycle"),
        ("candidates.0.observed_by", "probe", "plan_tampered"),
        ("candidates.0.provider_kind", "method", "plan_tampered"),
        ("preferred_provider_id", "connector:docs", "plan_tampered"),
        ("selected_provider.selected_by", "preferred", "plan_tampered"),
        ("selected_provider.provider_id", "connector:other", "plan_tampered"),
        ("envelope.executed_by", "someone", "plan_tampered"),
        ("plan_id", "sha256:" + "4" * 64, "plan_tampered"),
        ("hash_contract", "rfc8785-sha256/v1", "invalid_plan"),
        ("schema_version", "external_evidence_plan_v1", "invalid_plan"),
    ],
)
def test_any_plan_field_changed_is_rejected_with_a_named_reason(
    path: str, value: Any, reason: str
) -> None:
    plan = make_plan(envelope={"executed_by": "caller_host"})
    _set(plan, path, value)
    with rejected(reason):
        verify_plan(plan)
    with rejected(reason):
        check_receipt(plan, make_receipt(plan))


def test_a_rehashed_plan_that_the_rules_would_not_build_is_refused() -> None:
    plan = make_plan(
        inventory={"providers": [row("connector:a"), row("connector:b")]},
        preferred_provider_id="connector:a",
    )
    plan["selected_provider"]["provider_id"] = "connector:b"
    model = EvidencePlan.model_validate_json(json.dumps(plan))
    plan["plan_id"] = plan_id_of(model)
    with rejected("plan_not_reproducible"):
        verify_plan(plan)


# -- receipt -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("plan_id", "sha256:" + "1" * 64, "plan_id_mismatch"),
        ("request_id", "sha256:" + "2" * 64, "request_id_mismatch"),
        ("provider_id", "connector:foreign", "foreign_provider"),
        ("provider_kind", "method", "provider_kind_mismatch"),
    ],
)
def test_a_receipt_with_any_echoed_plan_field_changed_is_rejected(
    field: str, value: str, reason: str
) -> None:
    plan = make_plan()
    receipt = make_receipt(plan, **{field: value})
    with rejected(reason):
        check_receipt(plan, receipt)
    with rejected(reason):
        decide(plan, receipt, decision="reject", reason="no")


def test_a_receipt_for_a_stale_plan_id_is_rejected() -> None:
    old = make_plan(objective="Compare old behavior")
    current = make_plan()
    with rejected("plan_id_mismatch"):
        check_receipt(current, make_receipt(old))


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"status": "failed"}, "sources_on_empty_receipt"),
        ({"status": "no_evidence"}, "sources_on_empty_receipt"),
        ({"sources": []}, "succeeded_without_sources"),
        ({"sources": [source(), source()]}, "duplicate_source_ref"),
        ({"sources": [source(content_digest="md5:00")]}, "invalid_digest"),
        ({"sources": [source(accessed_at="2026-03-01T10:00:00")]}, "invalid_timestamp"),
        (
            {"sources": [source(accessed_at="2026-03-02T00:00:00+00:00")]},
            "accessed_after_completion",
        ),
        ({"sources": [source(finding="  ")]}, "empty_text"),
        ({"sources": [source(publication_date="last week")]}, "invalid_date"),
        ({"status": "partial"}, "invalid_receipt"),
        ({"completed_at": None}, "invalid_receipt"),
    ],
)
def test_receipt_provenance_rules_have_named_reasons(
    overrides: dict[str, Any], reason: str
) -> None:
    plan = make_plan()
    with rejected(reason):
        check_receipt(plan, make_receipt(plan, **overrides))


def test_failed_and_empty_receipts_carry_no_sources_and_can_be_rejected() -> None:
    plan = make_plan()
    receipt = make_receipt(plan, status="failed", sources=[])
    assert check_receipt(plan, receipt).source_refs == ()
    admission = decide(plan, receipt, decision="reject", reason="read failed")
    assert retire(admission, []).state == "retired"


# -- admit ---------------------------------------------------------------------------------


def test_admitting_a_source_not_in_the_receipt_is_rejected() -> None:
    plan = make_plan()
    with rejected("unknown_source"):
        decide(
            plan,
            make_receipt(plan),
            decision="admit",
            reason="x",
            admit_sources=["https://elsewhere.example/"],
        )


def test_admit_and_reject_must_agree_with_their_sources() -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    with rejected("nothing_admitted"):
        decide(plan, receipt, decision="admit", reason="x")
    with rejected("rejected_with_admitted_sources"):
        decide(plan, receipt, decision="reject", reason="x", admit_sources=[SOURCE_A])
    with rejected("missing_reason"):
        decide(plan, receipt, decision="admit", reason=" ", admit_sources=[SOURCE_A])


def test_the_same_decision_twice_is_the_same_admission() -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    one = decide(plan, receipt, decision="admit", reason="x", admit_sources=[SOURCE_B, SOURCE_A])
    two = decide(plan, receipt, decision="admit", reason="x", admit_sources=[SOURCE_A, SOURCE_B])
    assert one == two


def test_an_admission_binds_the_complete_receipt() -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = decide(plan, receipt, decision="admit", reason="x", admit_sources=[SOURCE_A])
    edited = copy.deepcopy(receipt)
    edited["summary"] = "A different summary"
    with rejected("receipt_digest_mismatch"):
        project(plan, edited, admission)


def test_a_tampered_admission_does_not_retire() -> None:
    plan = make_plan()
    admission = decide(
        plan, make_receipt(plan), decision="admit", reason="x", admit_sources=[SOURCE_A]
    )
    data = json.loads(admission.model_dump_json())
    data["reason"] = "edited later"
    with rejected("admission_tampered"):
        retire(data, [SOURCE_A])
    data = json.loads(admission.model_dump_json())
    data["admitted_sources"][0]["source_ref"] = "https://elsewhere.example/"
    with rejected("unknown_source"):
        verify_admission(data)


# -- retire --------------------------------------------------------------------------------


def test_rejected_evidence_retires_immediately() -> None:
    plan = make_plan()
    admission = decide(plan, make_receipt(plan), decision="reject", reason="off topic")
    retirement = retire(admission, [])
    assert (retirement.ready, retirement.reasons) == (True, ("rejected_retires_immediately",))


def test_admitted_evidence_stays_retained_until_every_source_is_read_back() -> None:
    plan = make_plan()
    admission = decide(
        plan, make_receipt(plan), decision="admit", reason="x", admit_sources=[SOURCE_A, SOURCE_B]
    )
    partial = retire(admission, [SOURCE_A])
    assert (partial.state, partial.missing_source_refs) == ("retained", (SOURCE_B,))
    assert retire(admission, [SOURCE_A, SOURCE_B, "https://unrelated.example/"]).ready


def test_downstream_with_foreign_lineage_does_not_count() -> None:
    plan = make_plan()
    admission = decide(
        plan, make_receipt(plan), decision="admit", reason="x", admit_sources=[SOURCE_A]
    )
    foreign = DownstreamSource(source_ref=SOURCE_A, admission_id="sha256:" + "9" * 64)
    retirement = retire(admission, [foreign])
    assert retirement.state == "retained"
    assert f"lineage_mismatch:{SOURCE_A}" in retirement.reasons


# -- projection ----------------------------------------------------------------------------


def test_readback_carries_only_compact_fields_in_one_rendering() -> None:
    plan = make_plan()
    long_finding = "line one\nline two\t" + "x" * 2000 + "\u200b"
    receipt = make_receipt(plan, sources=[source(finding=long_finding)])
    admission = decide(plan, receipt, decision="admit", reason="x", admit_sources=[SOURCE_A])
    readback = project(plan, receipt, admission)
    finding = readback.sources[0].finding
    assert "\n" not in finding
    assert "\u200b" not in finding
    assert len(finding) <= 600
    as_json = json.loads(render(readback, "json"))
    assert as_json == json.loads(readback.model_dump_json())
    markdown = render(readback, "markdown")
    assert SOURCE_A in markdown
    assert finding in markdown
    assert readback.plan_id in markdown


def test_content_id_of_a_plan_excludes_no_field_but_its_own_id() -> None:
    plan = make_plan()
    body = {key: value for key, value in plan.items() if key != "plan_id"}
    assert content_id(body) == plan["plan_id"]


def test_deciding_on_records_just_built_gives_the_same_admission_and_retirement() -> None:
    from external_query_service.admission._admit import decide_built
    from external_query_service.admission._retire import retire_built

    plan = make_plan()
    receipt = make_receipt(plan)
    built_plan, built_receipt = verify_plan(plan), parse_receipt(receipt)
    checked = decide(plan, receipt, decision="admit", reason="x", admit_sources=[SOURCE_A])
    built = decide_built(
        built_plan,
        built_receipt,
        receipt_digest=receipt_digest(built_receipt),
        decision="admit",
        reason="x",
        admit_sources=[SOURCE_A],
    )
    assert built == checked
    assert retire_built(built, [SOURCE_A]) == retire(checked, [SOURCE_A])
    # The identity and provenance rules still hold on the short path.
    with rejected("unknown_source"):
        decide_built(
            built_plan,
            built_receipt,
            receipt_digest=receipt_digest(built_receipt),
            decision="admit",
            reason="x",
            admit_sources=["https://elsewhere.example/"],
        )
