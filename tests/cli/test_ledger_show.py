"""``external-query ledger show PLAN_ID``: a bundle's plan ids lead back to the run, on both
ledger backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from external_query_service import verify_bundle
from external_query_service.cli import main
from external_query_service.storage import LedgerTarget
from external_query_service.testing import World
from tests.support.bundles import answer_airshow


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _ledger_section(target: LedgerTarget) -> dict[str, str]:
    return {"path": str(target)} if isinstance(target, Path) else {"url": target}


def test_a_bundles_plan_id_finds_its_run_in_the_ledger(
    world: World, ledger_target: LedgerTarget, capsys: pytest.CaptureFixture[str]
) -> None:
    answered = answer_airshow(world, ledger=_ledger_section(ledger_target))
    bundle = json.loads(answered.bundle)
    (plan_id,) = bundle["admission"]["plan_ids"]

    code, out, err = run(
        ["ledger", "show", plan_id, "--ledger", str(ledger_target), "--format", "json"], capsys
    )

    assert code == 0, err
    shown = json.loads(out)
    assert shown["plan_id"] == plan_id
    assert shown["provider_id"] == "searx"
    (found,) = shown["runs"]
    assert found["request_id"] == bundle["admission"]["request_id"]
    assert found["receipt_digests"] == bundle["admission"]["receipt_digests"]
    assert (found["receipts_held"], found["admissions_held"]) == (1, 1)
    assert verify_bundle(answered.bundle, settings=answered.settings).ledger == "held"

    code, markdown, _ = run(["ledger", "show", plan_id, "--ledger", str(ledger_target)], capsys)
    assert code == 0
    assert plan_id in markdown


def test_a_plan_the_ledger_does_not_hold_exits_3_and_a_malformed_id_exits_2(
    ledger_target: LedgerTarget, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = "sha256:" + "0" * 64

    code, out, err = run(["ledger", "show", absent, "--ledger", str(ledger_target)], capsys)
    assert (code, out) == (3, "")
    assert "holds no plan" in err

    code, out, err = run(["ledger", "show", "plan-1", "--ledger", str(ledger_target)], capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1
