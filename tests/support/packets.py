"""What the presenter tests hand a presenter and read back from its prompt: admitted
evidence, context packets around it, and the prompt's fenced evidence blocks."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from external_query_service.models import (
    AnswerContract,
    Evidence,
    EvidenceDecision,
    ExternalContextPacket,
    ExternalQueryPlan,
    TimeRange,
    VerifierResult,
)

#: When every made evidence item was fetched.
ACCESSED = datetime(2026, 12, 1, 8, 5, tzinfo=UTC)


def make_evidence(number: int, **overrides: Any) -> Evidence:
    """Page evidence number ``number``, each number on a site of its own unless ``site``
    says otherwise (``overrides`` replace fields)."""
    site = overrides.pop("site", f"site{number}.example")
    fields: dict[str, Any] = {
        "evidence_id": f"ev-{number}",
        "adapter_id": f"adapter-secret-{number}",
        "provider_type": "live_search",
        "basis": "page_body",
        "url": f"https://{site}/page/{number}",
        "title": f"页面标题{number}",
        "site": site,
        "snippet": f"证据片段{number}的正文",
        "score": 9000 - number,
        "published_at": date(2026, 11, 30),
        "accessed_at": ACCESSED,
        "content_digest": f"sha256:{number:064x}",
        "raw_digest": f"sha256:{number + 100:064x}",
    }
    fields.update(overrides)
    return Evidence(**fields)


def make_packet(
    evidence: tuple[Evidence, ...],
    *,
    contract: AnswerContract = "summary_with_sources",
    verifier: VerifierResult | None = None,
    compare_targets: tuple[str, ...] = (),
    question: str = "湛江明天天气怎么样？",
    uncertainties: tuple[str, ...] = (),
) -> ExternalContextPacket:
    """A weather packet for ``question`` holding ``evidence``, admitted by ``verifier`` (all
    of it, when the verdict names no decisions)."""
    plan = ExternalQueryPlan(
        question=question,
        query_kind="weather",
        answer_contract=contract,
        search_queries=("湛江 天气",),
        compare_targets=compare_targets,
        location="湛江",
        time_range=TimeRange(start=date(2026, 12, 1), end=date(2026, 12, 2)),
        planner_source="upstream_semantics",
    )
    # The packet holds admitted evidence only: a verdict given without decisions admits it all
    # (a refusal can still carry admitted evidence, e.g. too few independent sites).
    verifier = verifier or VerifierResult(status="answered")
    if not verifier.accepted and not verifier.rejected:
        verifier = verifier.model_copy(
            update={
                "accepted": tuple(
                    EvidenceDecision(evidence_id=item.evidence_id, decision="admit", reason="ok")
                    for item in evidence
                )
            }
        )
    return ExternalContextPacket(
        question=question,
        plan=plan,
        adapter_attempts=(),
        verified_evidence=evidence,
        verifier=verifier,
        uncertainties=uncertainties,
    )


def fixed_tokens(*tokens: str) -> Any:
    """A boundary-token factory that hands out ``tokens`` in order, so a test knows the
    prompt's evidence markers in advance."""
    queue = list(tokens)

    def factory() -> str:
        return queue.pop(0)

    return factory


def evidence_blocks(prompt: str, token: str) -> list[str]:
    """The evidence blocks of ``prompt`` fenced with ``token``, in order."""
    return re.findall(
        rf"<<EVIDENCE-{token}>>\n(.*?)\n<<END-EVIDENCE-{token}>>", prompt, flags=re.DOTALL
    )
