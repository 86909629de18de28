"""One rule for how many independent sources a plan needs, read by the gateway and the
verifier alike."""

from __future__ import annotations

import pytest

from external_query_service.models import AnswerContract, ExternalQueryPlan
from external_query_service.settings import VerifierSettings
from external_query_service.verifier._needs import SourcesNeeded, sources_needed

LIMITS = VerifierSettings(
    min_sources_direct_fact=2, min_sources_summary=3, min_sources_per_compare_target=4
)


def plan(contract: AnswerContract, targets: tuple[str, ...] = ()) -> ExternalQueryPlan:
    return ExternalQueryPlan(
        question="甲港和乙港的吞吐量",
        search_queries=("甲港和乙港的吞吐量",),
        answer_contract=contract,
        compare_targets=targets,
    )


@pytest.mark.parametrize(
    ("contract", "sites"),
    [("direct_fact", 2), ("summary_with_sources", 3), ("compare_with_sources", 4)],
)
def test_a_plan_without_compare_targets_needs_its_contracts_count_over_the_bundle(
    contract: AnswerContract, sites: int
) -> None:
    assert sources_needed(plan(contract), LIMITS) == SourcesNeeded(sites)


def test_a_comparison_with_targets_needs_the_per_target_count_for_each_target() -> None:
    needed = sources_needed(plan("compare_with_sources", ("甲港", "乙港")), LIMITS)
    assert needed == SourcesNeeded(4, ("甲港", "乙港"))


@pytest.mark.parametrize(("contract", "sites"), [("direct_fact", 2), ("summary_with_sources", 3)])
def test_compare_targets_on_another_contract_do_not_change_what_it_needs(
    contract: AnswerContract, sites: int
) -> None:
    assert sources_needed(plan(contract, ("甲港", "乙港")), LIMITS) == SourcesNeeded(sites)
