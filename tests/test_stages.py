"""The four stages as one object each, importable together; their old names still answer,
with a ``DeprecationWarning`` on every use."""

from __future__ import annotations

import asyncio
import importlib
import warnings

import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.models import ExternalContextPacket, Presentation
from external_query_service.presenter import ExtractivePresenter, ModelPresenter
from external_query_service.stages import Gateway, Planner, Presenter, Verifier
from external_query_service.toolkit import Verifier as ToolkitVerifier
from tests.support.packets import make_evidence, make_packet


def test_the_four_stages_import_together_from_their_folders() -> None:
    from external_query_service import planner, presenter, verifier
    from external_query_service.gateway._gateway import Gateway as GatewayAtHome

    assert planner.Planner is Planner
    assert GatewayAtHome is Gateway
    assert verifier.Verifier is Verifier
    assert presenter.Presenter is Presenter
    assert Verifier is not ToolkitVerifier  # the toolkit's is a protocol


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("external_query_service.planner", "ExternalQueryPlanner", Planner),
        ("external_query_service.planner._structured", "ExternalQueryPlanner", Planner),
        ("external_query_service.gateway._gateway", "ExternalQueryGateway", Gateway),
        ("external_query_service.verifier", "EvidenceVerifier", Verifier),
        ("external_query_service.verifier._verifier", "EvidenceVerifier", Verifier),
        ("external_query_service.presenter", "ExternalAnswerPresenter", ExtractivePresenter),
        (
            "external_query_service.presenter._extractive",
            "ExternalAnswerPresenter",
            ExtractivePresenter,
        ),
        ("external_query_service.presenter", "LLMAnswerPresenter", ModelPresenter),
        ("external_query_service.presenter._model", "LLMAnswerPresenter", ModelPresenter),
    ],
)
def test_an_old_stage_name_still_answers_with_a_deprecation_warning(
    module: str, old: str, new: type
) -> None:
    home = importlib.import_module(module)
    for _ in range(2):  # every use warns, not only the first
        with pytest.warns(DeprecationWarning, match=old):
            assert getattr(home, old) is new
    with pytest.warns(DeprecationWarning, match=old):
        exec(f"from {module} import {old}", {})
    assert old not in getattr(home, "__all__", ())
    with pytest.raises(AttributeError):
        getattr(home, old + "Nowhere")


def test_the_new_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from external_query_service.planner import Planner as planned
        from external_query_service.presenter import Presenter as presented

    assert (planned, presented) == (Planner, Presenter)


def answered_packet() -> ExternalContextPacket:
    return make_packet(evidence=[make_evidence(1)])


class _Model:
    """A model presenter hook that answers with a fixed presentation."""

    def __init__(self, shown: Presentation) -> None:
        self.shown = shown
        self.packets: list[ExternalContextPacket] = []

    async def present(self, packet: ExternalContextPacket) -> Presentation:
        self.packets.append(packet)
        return self.shown


def test_the_presenter_without_a_model_answers_extractively_sync_and_async() -> None:
    packet = answered_packet()
    stage = Presenter()
    expected = ExtractivePresenter().present(packet)

    assert stage.model is None
    assert stage.present(packet).text == expected.text
    assert asyncio.run(stage.apresent(packet)).text == expected.text


def test_the_presenter_asks_its_model_hook_only_in_the_async_call() -> None:
    packet = answered_packet()
    extractive = ExtractivePresenter()
    written = extractive.present(packet).model_copy(update={"text": "model", "renderer": "llm"})
    hook = _Model(written)
    stage = Presenter(extractive, model=hook)  # type: ignore[arg-type]

    assert asyncio.run(stage.apresent(packet)) is written
    assert hook.packets == [packet]
    assert stage.present(packet).text != "model"  # the sync call is the extractive answer
    assert stage.extractive is extractive


def test_a_service_holds_one_presenter_stage() -> None:
    with ExternalQueryService(Settings()) as service:
        assert isinstance(service.presenter, Presenter)
        assert isinstance(service.planner, Planner)
        assert isinstance(service.gateway, Gateway)
        assert isinstance(service.verifier, Verifier)
        assert service.presenter.model is None
