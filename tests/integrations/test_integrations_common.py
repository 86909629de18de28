"""What both integrations share, tested without either framework (these run everywhere)."""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from datetime import date
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from external_query_service import (
    ExternalQueryService,
    InputError,
    InvalidQuery,
    ServiceClosed,
    Settings,
)
from external_query_service.integrations import IntegrationUnavailable
from external_query_service.integrations._common import (
    ServiceHandle,
    cited_evidence,
    evidence_metadata,
    merge_semantics,
    parse_tool_arguments,
    positive_k,
    tool_arguments_model,
    tool_text,
)
from external_query_service.models import QuerySemantics
from external_query_service.testing import World

from .support import DOCS_QUESTION, DOCS_SEMANTICS, NEWS_QUESTION, docs_settings, news_service

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORK_MODULES = ("langchain_core", "llama_index")


def _extras() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras: dict[str, list[str]] = data["project"]["optional-dependencies"]
    return extras


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


# -- packaging ------------------------------------------------------------------------------


def test_the_dev_extra_pulls_in_neither_framework() -> None:
    dev = " ".join(_extras()["dev"]).lower()
    assert "langchain" not in dev
    assert "llama" not in dev


@pytest.mark.parametrize(
    ("extra", "project", "version"),
    [("langchain", "langchain-core", "1.8.3"), ("llamaindex", "llama-index-core", "0.14.25")],
)
def test_each_framework_extra_admits_the_release_it_is_tested_with(
    extra: str, project: str, version: str
) -> None:
    (requirement,) = _extras()[extra]
    assert requirement.startswith(project)
    assert version in SpecifierSet(requirement.removeprefix(project))


def test_importing_the_integrations_package_loads_neither_framework() -> None:
    done = _run_python(
        f"""
        import sys
        import external_query_service.integrations as integrations
        assert issubclass(integrations.IntegrationUnavailable, ImportError)
        loaded = sorted(m for m in sys.modules if m.startswith({FRAMEWORK_MODULES!r}))
        print(loaded)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [("langchain", "langchain_core", "langchain"), ("llamaindex", "llama_index", "llamaindex")],
)
def test_a_missing_framework_is_an_input_error_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, module: str, framework: str, extra: str
) -> None:
    # None in sys.modules is how Python spells "this module cannot be imported".
    for name in [m for m in sys.modules if m == framework or m.startswith(f"{framework}.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delitem(sys.modules, f"external_query_service.integrations.{module}", False)

    with pytest.raises(IntegrationUnavailable) as caught:
        importlib.import_module(f"external_query_service.integrations.{module}")

    assert isinstance(caught.value, InputError)
    assert isinstance(caught.value, ImportError)
    assert f"pip install 'external_query_service[{extra}]'" in str(caught.value)


# -- the service an integration answers with --------------------------------------------------


@pytest.mark.parametrize("given", [{}, "both"])
def test_an_integration_needs_exactly_one_of_service_or_settings(given: object) -> None:
    with ExternalQueryService() as service:
        arguments = {"service": service, "settings": Settings()} if given == "both" else {}
        with pytest.raises(InputError, match=r"exactly one of service= .* or settings="):
            ServiceHandle(**arguments)  # type: ignore[arg-type]


def test_service_and_settings_of_the_wrong_type_are_input_errors() -> None:
    with pytest.raises(InputError, match="service= must be an ExternalQueryService, not dict"):
        ServiceHandle(service={})  # type: ignore[arg-type]
    with pytest.raises(InputError, match="settings= must be a Settings, not str"):
        ServiceHandle(settings="external-query.toml")  # type: ignore[arg-type]


def test_closing_a_handle_leaves_a_shared_service_open() -> None:
    with ExternalQueryService(docs_settings()) as service:
        handle = ServiceHandle(service=service)
        handle.close()
        assert not handle.owned
        assert service.answer(DOCS_QUESTION, DOCS_SEMANTICS).status == "answered"


def test_closing_a_handle_closes_the_service_it_owns() -> None:
    handle = ServiceHandle(settings=docs_settings())
    assert handle.owned
    assert handle.service.answer(DOCS_QUESTION, DOCS_SEMANTICS).status == "answered"
    handle.close()
    handle.close()  # idempotent
    with pytest.raises(ServiceClosed):
        handle.service.answer(DOCS_QUESTION, DOCS_SEMANTICS)


def test_an_owned_service_closes_when_its_handle_is_collected() -> None:
    handle = ServiceHandle(settings=docs_settings())
    service = handle.service
    assert service.answer(DOCS_QUESTION, DOCS_SEMANTICS).status == "answered"
    del handle
    gc.collect()
    with pytest.raises(ServiceClosed):
        service.answer(DOCS_QUESTION, DOCS_SEMANTICS)


def test_an_owned_service_still_open_at_exit_is_closed_then() -> None:
    done = _run_python(
        f"""
        from external_query_service import service as module
        from external_query_service.integrations._common import ServiceHandle
        from tests.integrations.support import docs_settings

        close = module.ExternalQueryService.close

        def reporting_close(self):
            print("closed", self._closed)
            close(self)

        module.ExternalQueryService.close = reporting_close
        handle = ServiceHandle(settings=docs_settings())
        print(handle.service.answer({DOCS_QUESTION!r}, {DOCS_SEMANTICS!r}).status)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["answered", "closed False"]


def test_an_async_close_closes_an_owned_service() -> None:
    async def main() -> ExternalQueryService:
        handle = ServiceHandle(settings=docs_settings())
        answer = await handle.service.aanswer(DOCS_QUESTION, DOCS_SEMANTICS)
        assert answer.status == "answered"
        await handle.aclose()
        return handle.service

    service = asyncio.run(main())
    with pytest.raises(ServiceClosed):
        service.answer(DOCS_QUESTION, DOCS_SEMANTICS)


# -- request pieces ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "3", None])
def test_k_must_be_a_whole_number_of_at_least_one(value: object) -> None:
    with pytest.raises(InputError, match="k must be a whole number of at least 1"):
        positive_k(value)


def test_later_semantics_override_earlier_ones_field_by_field() -> None:
    merged = merge_semantics(
        {"query_kind": "news", "location": "珠海"},
        None,
        {"location": "湛江", "entities": ["航展"]},
    )
    assert merged is not None
    assert (merged.query_kind, merged.location, merged.entities) == ("news", "湛江", ("航展",))
    assert merge_semantics(None, {}) is None


def test_bad_semantics_in_any_layer_are_an_invalid_query() -> None:
    with pytest.raises(InvalidQuery, match="query_semantics: mood: unknown key"):
        merge_semantics({"query_kind": "news"}, {"mood": "sunny"})


# -- what a retriever may hand out ---------------------------------------------------------------


def test_cited_evidence_is_the_admitted_evidence_best_score_first(world: World) -> None:
    with news_service(world) as service:
        answer = service.answer(NEWS_QUESTION)
    cited = cited_evidence(answer)

    assert answer.status == "answered"
    admitted = {decision.evidence_id for decision in answer.verifier.accepted}
    assert {item.evidence_id for item in cited} == admitted
    assert len(cited) == 4
    scores = [item.score for item in cited]
    assert scores == sorted(scores, reverse=True)


def test_admitted_evidence_without_an_answer_is_not_handed_out(world: World) -> None:
    # Four sites admitted, five required: the chain refuses to answer from them.
    with news_service(world, verifier={"min_sources_summary": 5}) as service:
        answer = service.answer(NEWS_QUESTION)

    assert (answer.status, answer.reason) == ("insufficient_evidence", "insufficient_sources")
    assert len(answer.evidence) == 4
    assert cited_evidence(answer) == ()


def test_evidence_metadata_is_json_with_iso_dates_and_a_zero_to_one_score(world: World) -> None:
    with news_service(world) as service:
        item = cited_evidence(service.answer(NEWS_QUESTION))[0]
    metadata = evidence_metadata(item)

    assert json.loads(json.dumps(metadata)) == metadata
    assert set(metadata) == {
        "url",
        "site",
        "title",
        "published_at",
        "accessed_at",
        "evidence_id",
        "content_digest",
        "adapter_id",
        "basis",
        "score",
    }
    assert metadata["published_at"] == "2026-11-12"
    assert metadata["accessed_at"] == item.accessed_at.isoformat()
    assert metadata["score"] == item.score / 10_000
    assert (metadata["site"], metadata["basis"], metadata["adapter_id"]) == (
        "news-a.test",
        "page_body",
        "searx",
    )


# -- the tool's arguments -----------------------------------------------------------------------


def test_tool_arguments_are_the_question_and_every_semantics_field() -> None:
    model = tool_arguments_model(("news", "documentation"))
    schema = model.model_json_schema()

    assert next(iter(schema["properties"])) == "question"
    assert schema["required"] == ["question"]
    assert set(schema["properties"]) == {"question", *QuerySemantics.model_fields}
    assert all(field.get("description") for field in schema["properties"].values())
    kinds = schema["properties"]["query_kind"]["anyOf"][0]["enum"]
    assert kinds == ["news", "documentation"]


def test_tool_arguments_left_at_their_defaults_keep_the_tool_defaults() -> None:
    model = tool_arguments_model(("news", "documentation"))
    question, semantics = parse_tool_arguments(
        model,
        {
            "question": "Q?",
            "query_kind": None,
            "entities": [],
            "time_range": {"start": "2026-11-01", "end": "2026-11-30"},
        },
        merge_semantics({"query_kind": "documentation", "entities": ["verifier"]}),
    )
    assert question == "Q?"
    assert semantics is not None
    assert semantics.query_kind == "documentation"
    assert semantics.entities == ("verifier",)
    assert semantics.time_range is not None
    assert semantics.time_range.start == date(2026, 11, 1)


@pytest.mark.parametrize(
    ("arguments", "reason", "message"),
    [
        ({"question": "Q?", "mood": "sunny"}, "invalid_semantics", "mood: unknown key"),
        ({"question": "Q?", "query_kind": "poetry"}, "invalid_semantics", "query_kind"),
        ({"query_kind": "news"}, "invalid_question", "question: Field required"),
    ],
)
def test_bad_tool_arguments_are_an_invalid_query_naming_the_field(
    arguments: dict[str, object], reason: str, message: str
) -> None:
    model = tool_arguments_model(("news",))
    with pytest.raises(InvalidQuery, match=message) as caught:
        parse_tool_arguments(model, arguments, None)
    assert caught.value.reason == reason


def test_tool_text_is_the_answer_then_its_status() -> None:
    with ExternalQueryService(docs_settings()) as service:
        answered = service.answer(DOCS_QUESTION, DOCS_SEMANTICS)
        refused = service.answer(DOCS_QUESTION)  # no documentation kind: nobody to ask

    assert tool_text(answered).startswith(answered.text.rstrip())
    assert tool_text(answered).endswith("\n\nstatus: answered")
    assert tool_text(refused).endswith("status: insufficient_evidence (no_ready_provider)")


def test_scores_rank_on_a_zero_to_one_scale(world: World) -> None:
    # The ranker's order, not a saturated 10000 for every hit: distinct, 0..1, best first.
    with news_service(world) as service:
        cited = cited_evidence(service.answer(NEWS_QUESTION))
    scores = [evidence_metadata(item)["score"] for item in cited]
    assert all(isinstance(score, float) and 0 < score < 1 for score in scores)
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(scores)
