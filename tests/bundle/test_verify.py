"""verify_bundle against loopback worlds: the real guarded fetcher, real pages and PDFs."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from external_query_service import InputError, __version__, verify_bundle
from external_query_service._bundle import bundle_secret
from external_query_service._canonical import content_id
from external_query_service.bundle import averify_bundle
from external_query_service.bundle._verify import closest_passage, locate
from external_query_service.errors import EvidenceInputError
from external_query_service.storage import open_ledger
from external_query_service.testing import (
    Reply,
    World,
    hit,
    json_reply,
    open_world,
)
from tests.support.bundles import (
    AIRSHOW_PARAGRAPHS,
    airshow_page,
    answer_airshow,
    answer_nothing,
    answer_pdf,
    pdf_pages,
)
from tests.support.paths import REPO
from tests.support.world import closed_port, make_service


def _edited(bundle: str, old: str, new: str) -> str:
    assert old in bundle
    return bundle.replace(old, new, 1)


def test_an_answered_questions_bundle_holds_offline_and_with_refetch(world: World) -> None:
    answered = answer_airshow(world)
    assert answered.answer.status == "answered"
    before = len(world.requests_to("/airshow"))

    offline = verify_bundle(answered.bundle, settings=answered.settings)
    again = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert offline.verdict == "holds"
    assert not offline.refetched
    assert [item.verdict for item in offline.sources] == ["holds"]
    assert len(world.requests_to("/airshow")) == before + 1  # refetch only, each URL once
    assert again.verdict == "holds"
    assert again.refetched
    assert [(item.verdict, item.refetched) for item in again.sources] == [("holds", True)]
    assert again.bundle_id == json.loads(answered.bundle)["bundle_id"]


def test_a_page_with_new_bytes_but_the_same_quote_still_holds(world: World) -> None:
    answered = answer_airshow(world)
    world.page("news-a.test", "/airshow", airshow_page((*AIRSHOW_PARAGRAPHS, "新增一段报道。")))

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert result.verdict == "holds"
    assert result.sources[0].detail == "the quote is still on the page"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("多款新机型首次公开亮相", "多款新机型首次公开展示"),  # a quoted word
        ("news-a.test", "news-b.test"),  # a URL
        ('"status":"answered"', '"status":"clarify"'),  # the outcome
    ],
)
def test_a_bundle_edited_after_the_fact_is_tampered(world: World, old: str, new: str) -> None:
    answered = answer_airshow(world)
    edited = _edited(answered.bundle, old, new)

    result = verify_bundle(edited, settings=answered.settings)

    assert result.verdict == "tampered"
    before = len(world.requests)
    assert verify_bundle(edited, settings=answered.settings, refetch=True).verdict == "tampered"
    assert len(world.requests) == before  # nothing from a tampered bundle is fetched


def test_an_edited_quote_names_its_source_as_tampered(world: World) -> None:
    answered = answer_airshow(world)
    edited = _edited(answered.bundle, "大型无人运输机", "大型有人运输机")

    result = verify_bundle(edited, settings=answered.settings)

    assert [item.verdict for item in result.sources] == ["tampered"]
    assert "source_id" in result.sources[0].detail


def test_a_signed_bundle_verifies_with_its_key_and_is_tampered_under_another(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EQ_TEST_BUNDLE_KEY", "first secret")
    answered = answer_airshow(world, bundle={"signing_key_env": "EQ_TEST_BUNDLE_KEY"})
    signed = json.loads(answered.bundle)
    assert signed["signature"]["algorithm"] == "hmac-sha256"
    assert "first secret" not in answered.bundle

    assert verify_bundle(answered.bundle, settings=answered.settings).signature == "valid"
    monkeypatch.setenv("EQ_TEST_BUNDLE_KEY", "another secret")
    result = verify_bundle(answered.bundle, settings=answered.settings)
    assert (result.verdict, result.signature) == ("tampered", "invalid")
    plain = answered.settings.model_copy(update={"bundle": type(answered.settings.bundle)()})
    unchecked = verify_bundle(answered.bundle, settings=plain)
    assert (unchecked.verdict, unchecked.signature) == ("holds", "unchecked")
    unsigned = verify_bundle(answered.answer.bundle(), settings=answered.settings)
    assert (unsigned.verdict, unsigned.signature) == ("holds", "absent")
    assert unsigned.detail.endswith("unsigned, though a signing key is configured here")


def test_an_edit_with_every_digest_recomputed_is_caught_by_the_signature(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EQ_TEST_BUNDLE_KEY", "the secret")
    answered = answer_airshow(world, bundle={"signing_key_env": "EQ_TEST_BUNDLE_KEY"})
    forged = json.loads(answered.bundle)
    forged["status"] = "clarify"
    forged.pop("bundle_id")
    signature = forged.pop("signature")
    forged["bundle_id"] = content_id(forged)
    forged["signature"] = signature

    result = verify_bundle(json.dumps(forged, ensure_ascii=False), settings=answered.settings)

    assert (result.verdict, result.signature) == ("tampered", "invalid")
    assert bundle_secret("EQ_TEST_BUNDLE_KEY") is not None


def test_a_page_edited_so_the_quote_is_gone_is_changed_naming_the_closest_passage(
    world: World,
) -> None:
    answered = answer_airshow(world)
    rewritten = (
        "第十六届中国航展11月在珠海开幕，多款新型飞机首次公开亮相，其中包括新型预警机。",
        AIRSHOW_PARAGRAPHS[1],
    )
    world.page("news-a.test", "/airshow", airshow_page(rewritten))

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert result.verdict == "changed"
    (source,) = result.sources
    assert source.verdict == "changed"
    assert source.closest is not None
    assert "多款新型飞机首次公开亮相" in source.closest


@pytest.mark.parametrize("status", [404, 410, 403])
def test_a_page_that_answers_404_410_or_another_refusal_is_gone(world: World, status: int) -> None:
    answered = answer_airshow(world)
    world.page("news-a.test", "/airshow", "no such page", status=status)

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert (result.verdict, result.retryable) == ("gone", False)
    assert str(status) in result.sources[0].detail


def test_a_page_the_network_policy_now_refuses_is_gone_without_a_request(world: World) -> None:
    answered = answer_airshow(world)
    network = answered.settings.network.model_copy(update={"allowed_networks": ()})
    before = len(world.requests)

    result = verify_bundle(
        answered.bundle,
        settings=answered.settings.model_copy(update={"network": network}),
        refetch=True,
    )

    assert (result.verdict, result.retryable) == ("gone", False)
    assert result.sources[0].detail.startswith("refused by the network policy")
    assert len(world.requests) == before


def test_a_page_that_is_no_longer_a_document_is_gone(world: World) -> None:
    answered = answer_airshow(world)
    world.route(answered.url, Reply(status=200, body=b"\x00\x01", content_type="application/zip"))

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert result.verdict == "gone"
    assert "no longer a document" in result.sources[0].detail


def test_a_server_error_is_unreachable_and_retryable(world: World) -> None:
    answered = answer_airshow(world)
    world.page("news-a.test", "/airshow", "busy", status=503)

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert (result.verdict, result.retryable) == ("unreachable", True)
    assert result.sources[0].retryable


def test_a_host_nobody_answers_on_is_unreachable(world: World) -> None:
    answered = answer_airshow(world)
    port = closed_port()
    settings = answered.settings.model_copy(
        update={
            "network": answered.settings.network.model_copy(
                update={"connect_to": {f"news-a.test:{world.server.port}": f"127.0.0.1:{port}"}}
            )
        }
    )

    result = verify_bundle(answered.bundle, settings=settings, refetch=True)

    assert (result.verdict, result.retryable) == ("unreachable", True)


def test_a_pdf_source_checks_its_page(world: World) -> None:
    answered = answer_pdf(world)
    source = json.loads(answered.bundle)["sources"][0]
    assert (source["page"], source["reader"]["name"]) == (2, "pdf_text")

    held = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)
    assert held.verdict == "holds"

    # The same words, now on page 3 (a page inserted before them): bytes and page differ.
    moved = pdf_pages(
        (
            ("港口年度报告", "第一章 概况：本报告介绍港口的基本情况。"),
            ("插入的一页：目录。",),
            ("第二章 生产：2026年港口集装箱吞吐量达到850万标准箱，同比增长百分之六。",),
        )
    )
    world.page("port.test", "/report.pdf", moved, content_type="application/pdf")
    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert result.verdict == "changed"
    assert result.sources[0].detail == "the quote is now on page 3, not page 2"


def test_a_pdf_whose_bytes_differ_but_whose_page_holds_the_quote_holds(world: World) -> None:
    answered = answer_pdf(world)
    pages = (
        ("港口年度报告（修订版）", "第一章 概况：本报告介绍港口的基本情况。"),
        ("第二章 生产：2026年港口集装箱吞吐量达到850万标准箱，同比增长百分之六。",),
    )
    world.page("port.test", "/report.pdf", pdf_pages(pages), content_type="application/pdf")

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert result.verdict == "holds"
    assert result.sources[0].detail == "the quote is still on the page (page 2)"


def test_an_insufficient_evidence_answer_bundles_and_verifies_with_nothing_to_refetch(
    world: World,
) -> None:
    answered = answer_nothing(world)
    assert answered.answer.status == "insufficient_evidence"
    before = len(world.requests)

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert (result.verdict, result.status, result.sources) == ("holds", "insufficient_evidence", ())
    assert not result.refetched
    assert len(world.requests) == before


def test_the_ledger_that_holds_the_run_says_so_and_another_says_it_does_not(
    world: World, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    answered = answer_airshow(world, ledger={"path": str(ledger)})
    assert answered.answer.admission.persisted

    held = verify_bundle(answered.bundle, settings=answered.settings)
    assert (held.verdict, held.ledger) == ("holds", "held")

    other = tmp_path / "other.sqlite3"
    open_ledger(other).close()
    elsewhere = answered.settings.model_copy(
        update={"ledger": answered.settings.ledger.model_copy(update={"path": other})}
    )
    result = verify_bundle(answered.bundle, settings=elsewhere)
    assert (result.verdict, result.ledger) == ("holds", "not_held")
    assert "none of the bundle's plan ids" in result.ledger_detail
    missing = answered.settings.ledger.model_copy(update={"path": tmp_path / "absent.sqlite3"})
    absent = verify_bundle(
        answered.bundle, settings=answered.settings.model_copy(update={"ledger": missing})
    )
    assert absent.ledger == "unavailable"
    assert not (tmp_path / "absent.sqlite3").exists()  # verifying never creates a ledger


def test_text_that_is_not_a_bundle_is_an_input_error() -> None:
    with pytest.raises(InputError, match="not an answer bundle"):
        verify_bundle('{"schema_version": "something_else"}')
    with pytest.raises(EvidenceInputError) as caught:
        verify_bundle('{"schema_version": "external_query_bundle_v1", "x": 1.5}')
    assert caught.value.reason == "float_in_hashed_record"
    with pytest.raises(InputError, match="not a readable answer bundle"):
        verify_bundle('{"schema_version": "external_query_bundle_v1"}')


def test_verify_bundle_runs_inside_an_event_loop_too(world: World) -> None:
    answered = answer_airshow(world)

    async def both() -> tuple[str, str]:
        inside = verify_bundle(answered.bundle, settings=answered.settings)
        direct = await averify_bundle(answered.bundle, settings=answered.settings, refetch=True)
        return inside.verdict, direct.verdict

    assert asyncio.run(both()) == ("holds", "holds")


def test_a_quote_is_found_whatever_its_whitespace() -> None:
    text = "第一行\n\n第二行  的文字"
    assert locate("第二行 的文字", text) == 5
    assert locate("第二行的文字", text) is None
    assert "二行 的文" in closest_passage("第二行的文字", text)
    assert closest_passage("任何", "   ") == ""


BUNDLES_DOC = REPO / "docs" / "architecture" / "bundles.md"


def test_the_worked_example_in_the_bundles_doc_prints_what_the_doc_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)  # the example names the world by its path in the repository
    section = BUNDLES_DOC.read_text(encoding="utf-8").split("\n## A worked example\n", 1)[1]
    code, shown, source = re.findall(r"```(?:python|markdown|json)\n(.*?)```", section, re.DOTALL)[
        :3
    ]

    exec(compile(code, str(BUNDLES_DOC), "exec"), {})

    printed = capsys.readouterr().out
    assert printed.strip() == shown.strip()
    first = json.loads(source)
    assert first["source_id"] == content_id({k: v for k, v in first.items() if k != "source_id"})


def test_a_fact_apis_reply_holds_while_its_bytes_are_the_same_and_is_changed_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    semantics = {
        "query_kind": "weather",
        "location": "湛江",
        "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
    }
    with (
        open_world("examples/cases/worlds/zhanjiang-weather") as world,
        world.service() as service,
    ):
        answer = service.answer("湛江明天天气怎么样？", semantics)
        bundle = answer.bundle()
        (source,) = json.loads(bundle)["sources"]
        assert source["basis"] == "fact_api"

        held = verify_bundle(bundle, settings=world.settings(), refetch=True)
        world.route(source["final_url"], json_reply({"daily": {"time": ["2026-12-01"]}}))
        changed = verify_bundle(bundle, settings=world.settings(), refetch=True)

    assert (held.verdict, held.sources[0].detail) == ("holds", "the same bytes as when quoted")
    assert (changed.verdict, changed.sources[0].detail) == (
        "changed",
        "the provider's reply is no longer the same",
    )


def test_a_redirected_source_keeps_both_urls_and_is_refetched_where_its_body_came_from(
    world: World,
) -> None:
    question = "2026年珠海航展有哪些新机型亮相？"
    page = world.page("news-a.test", "/airshow", airshow_page())
    old = world.route(
        world.url("news-a.test", "/old-airshow"),
        Reply(status=301, body=b"", headers={"Location": page}),
    )
    world.results(question, [hit(old, "珠海航展", "新机型亮相", "2026-11-12")])
    settings = world.settings(world.searxng())
    with make_service(world, world.searxng()) as service:
        bundle = service.answer(question).bundle()
    (source,) = json.loads(bundle)["sources"]
    before = len(world.requests_to("/old-airshow"))

    result = verify_bundle(bundle, settings=settings, refetch=True)

    assert (source["url"], source["final_url"]) == (old, page)
    assert result.verdict == "holds"
    assert len(world.requests_to("/old-airshow")) == before


def test_a_quote_missed_by_another_reader_version_says_so(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("external_query_service._bundle.__version__", "0.0.9")
    answered = answer_airshow(world)
    world.page("news-a.test", "/airshow", airshow_page(("本届航展的展期共六天。",)))

    result = verify_bundle(answered.bundle, settings=answered.settings, refetch=True)

    assert result.verdict == "changed"
    assert result.sources[0].detail == (
        f"the quote is no longer on the page (quoted by reader 0.0.9, read again by {__version__})"
    )
