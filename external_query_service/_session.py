"""``Session``: a conversation whose follow-ups re-plan from the last question's plan."""

from __future__ import annotations

from typing import Protocol

from ._questions import SemanticsInput
from .execution._portal import Portal
from .models import ExternalAnswer, ExternalQueryPlan

__all__ = ["Session"]


class _Answering(Protocol):
    """What a session asks of its service (``ExternalQueryService``)."""

    _portal: Portal

    async def aanswer(
        self, question: str, query_semantics: SemanticsInput = None
    ) -> ExternalAnswer: ...

    async def _follow_up(
        self, question: str, previous: ExternalQueryPlan, query_semantics: SemanticsInput
    ) -> ExternalAnswer: ...


class Session:
    """Keeps the last plan so a follow-up re-plans from it (``route_mode`` stays external);
    ``last_plan`` resumes a session kept elsewhere (a server's shared session table).

    ``history`` holds the answers, only the latest ``history_limit`` of them when a limit is
    given (0 keeps none: a long-lived server needs the last plan, not every answer).
    """

    def __init__(
        self,
        service: _Answering,
        *,
        history_limit: int | None = None,
        last_plan: ExternalQueryPlan | None = None,
    ) -> None:
        if history_limit is not None and history_limit < 0:
            raise ValueError("history_limit must not be negative")
        self._service = service
        self._history_limit = history_limit
        self._last_plan: ExternalQueryPlan | None = last_plan
        self.history: list[ExternalAnswer] = []

    @property
    def last_plan(self) -> ExternalQueryPlan | None:
        """The plan of the session's last question (None before the first)."""
        return self._last_plan

    def _keep(self, answer: ExternalAnswer) -> ExternalAnswer:
        self._last_plan = answer.plan
        self.history.append(answer)
        if self._history_limit is not None:
            del self.history[: len(self.history) - self._history_limit]
        return answer

    async def aask(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Ask a new question in this session; it becomes the plan follow-ups continue from."""
        return self._keep(await self._service.aanswer(question, query_semantics))

    def ask(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Synchronous ``aask``."""
        return self._service._portal.call(self.aask(question, query_semantics))

    async def afollow_up(
        self, question: str, query_semantics: SemanticsInput = None
    ) -> ExternalAnswer:
        """Continue the last question (same kind, targets, place and time range) with new
        external attempts; without a previous question it is asked afresh."""
        previous = self.last_plan
        if previous is None:
            return await self.aask(question, query_semantics)
        return self._keep(await self._service._follow_up(question, previous, query_semantics))

    def follow_up(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Synchronous ``afollow_up``."""
        return self._service._portal.call(self.afollow_up(question, query_semantics))
