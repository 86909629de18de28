"""ToolkitSession: observe → arguments → operate by ids, one operation per state_ref."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from external_query_service._evidence_store import EvidenceStore
from external_query_service.testing import LoopbackServer
from external_query_service.toolkit import (
    EvidenceTask,
    StaleState,
    ToolkitError,
    ToolkitSession,
    load_task,
)
from external_query_service.toolkit._operations import ArgumentsResult
from tests.support.toolkit_tasks import LICENCE, REQUIREMENT, make_task, write


def option(result: ArgumentsResult, parameter: str, label_part: str = "") -> str:
    domain = next(item for item in result.domains if item.parameter == parameter)
    return next(o.id for o in domain.options if label_part in o.label)


def step(session: ToolkitSession, tool: str, **labels: str) -> dict[str, Any]:
    """Observe, pick options by label (parents first), operate; return the result."""
    seen = session.observe()
    state = seen.state_ref
    chosen: dict[str, str] = {}
    contract = session.contract(tool)  # an older, unadvertised name works too
    for parameter in contract.parameters:
        parent = (
            {parameter.depends_on: chosen[parameter.depends_on]} if parameter.depends_on else {}
        )
        offered = session.arguments(tool, state, parent)
        chosen[parameter.name] = option(offered, parameter.name, labels.get(parameter.name, ""))
    outcome = asyncio.run(session.operate(tool, chosen, state))
    assert outcome.ok, outcome.error
    assert isinstance(outcome.result, dict)
    return outcome.result


@pytest.fixture
def session(tmp_path: Path, docs: LoopbackServer) -> ToolkitSession:
    return ToolkitSession(make_task(tmp_path, docs))


def test_observe_lists_the_tools_of_a_web_task_and_a_state_ref(session: ToolkitSession) -> None:
    seen = session.observe()
    assert [tool.name for tool in seen.tools] == [
        "web.open_link",
        "web.read_section",
        "read_evidence",
        "evidence_page",
        "record_evidence",
        "save_report",
    ]
    assert seen.state_ref.startswith("state:0:")
    assert seen.task is not None
    assert seen.task.required == ("requirements", "licence")
    assert seen.receipt is not None
    assert seen.receipt.exists is False
    assert [check.reason for check in seen.checks] == ["no_record", "no_record"]


def test_a_used_state_ref_is_refused_as_repeated(session: ToolkitSession) -> None:
    state = session.observe().state_ref
    url_id = option(session.arguments("web.open", state), "url")
    first = asyncio.run(session.operate("web.open", {"url": url_id}, state))
    assert first.ok
    with pytest.raises(StaleState) as caught:
        asyncio.run(session.operate("web.open", {"url": url_id}, state))
    assert caught.value.reason == "repeated_state_ref"
    assert first.state_ref != state


def test_an_unknown_state_ref_is_refused(session: ToolkitSession) -> None:
    with pytest.raises(StaleState) as caught:
        session.arguments("web.open", "state:0:000000000000000000000000")
    assert caught.value.reason == "unknown_state_ref"


def test_a_state_ref_issued_before_the_state_changed_is_refused_as_stale(
    session: ToolkitSession,
) -> None:
    old = session.observe().state_ref
    session.store.put("另一条证据文本", source="elsewhere")  # e.g. an answer() run meanwhile
    with pytest.raises(StaleState) as caught:
        session.arguments("web.open", old)
    assert caught.value.reason == "stale_state_ref"
    assert session.observe().state_ref != old


def test_an_id_that_was_not_offered_is_refused_before_anything_runs(
    session: ToolkitSession, docs: LoopbackServer
) -> None:
    state = session.observe().state_ref
    with pytest.raises(ToolkitError) as caught:
        asyncio.run(session.operate("web.open", {"url": "o-000000000000"}, state))
    assert caught.value.reason == "argument_not_offered"
    with pytest.raises(ToolkitError) as missing:
        asyncio.run(session.operate("web.open", {}, state))
    assert missing.value.reason == "missing_argument"
    assert docs.requests == []
    # Nothing ran, so the state_ref is still good.
    url_id = option(session.arguments("web.open", state), "url")
    assert asyncio.run(session.operate("web.open", {"url": url_id}, state)).ok


def test_dependent_candidates_appear_only_after_the_parent_is_chosen(
    session: ToolkitSession,
) -> None:
    step(session, "web.open")
    step(session, "web.follow", link="/guide")
    state = session.observe().state_ref
    top = session.arguments("evidence.record", state)
    assert [domain.parameter for domain in top.domains] == ["category"]
    assert top.waiting_for_parent == ("passage",)
    requirement = option(top, "category", "requirements")
    licence = option(top, "category", "licence")
    passages = session.arguments("evidence.record", state, {"category": requirement})
    assert passages.domains[0].total == 1
    assert REQUIREMENT in passages.domains[0].options[0].label
    none_yet = session.arguments("evidence.record", state, {"category": licence})
    assert none_yet.domains[0].total == 0


def test_a_whole_task_can_be_driven_step_by_step_to_a_matching_report(
    session: ToolkitSession,
) -> None:
    step(session, "web.open_link", link="(entry)")
    step(session, "web.open_link", link="/guide")
    step(session, "web.open_link", link="/licence")
    record = step(session, "record_evidence", category="requirements")
    assert REQUIREMENT in str(record["quote"])
    step(session, "record_evidence", category="licence")
    section = step(session, "web.read_section", page="/licence", passage=LICENCE[:3])
    assert LICENCE in str(section["text"])
    window = step(session, "read_evidence", ref="/guide")
    assert window["offset"] == 0

    receipt = step(session, "save_report")
    assert receipt["matches"] is True
    seen = session.observe()
    assert seen.receipt is not None
    assert seen.receipt.matches is True
    assert [check.passed for check in seen.checks] == [True, True]
    assert seen.last_read is not None
    assert LICENCE not in seen.last_read
    assert seen.usage["pages"] == 3


def test_a_tool_that_fails_reports_its_reason_and_still_consumes_the_state_ref(
    session: ToolkitSession,
) -> None:
    step(session, "web.open")
    step(session, "report.save")
    state = session.observe().state_ref
    save_again = asyncio.run(session.operate("report.save", {}, state))
    assert save_again.ok is False
    assert save_again.error is not None
    assert save_again.error.reason == "output_exists"
    with pytest.raises(StaleState):
        session.arguments("report.save", state)


def test_without_a_task_only_bounded_evidence_reads_are_offered() -> None:
    store = EvidenceStore()
    ref = store.put("证据" * 1000, source="https://example.test/")
    session = ToolkitSession(store=store)
    seen = session.observe()
    assert [tool.name for tool in seen.tools] == ["read_evidence", "evidence_page"]
    offsets = session.arguments("evidence.read", seen.state_ref, {"ref": _ref_id(session, ref)})
    assert [o.label for o in offsets.domains[0].options] == [
        "characters 0–1200",
        "characters 1200–2000",
    ]


def _ref_id(session: ToolkitSession, ref: str) -> str:
    state = session.observe().state_ref
    return option(session.arguments("evidence.read", state), "ref", "example.test")


def test_a_workspace_task_offers_file_tools_and_records_from_searches(tmp_path: Path) -> None:
    write(tmp_path / "corpus" / "a.py", "x = 1\nreturn verify_token(t)\n")
    spec, task_dir = load_task(
        write(tmp_path / "t.toml", 'name = "w"\nsource = "workspace"\nreports_dir = "r"\n')
    )
    task = EvidenceTask(
        spec,
        {"root": "corpus", "markers": {"impl": "verify_token"}, "output": "w.json"},
        task_dir=task_dir,
        base_dir=tmp_path,
    )
    session = ToolkitSession(task)
    assert "files.search" in [tool.name for tool in session.observe().tools]
    found = step(session, "files.search", query="verify_token")
    assert found["files_matched"] == 1
    step(session, "files.read", path="a.py")
    record = step(session, "evidence.record", category="impl")
    assert record["source"] == "workspace:a.py"


def test_web_links_lists_what_a_captured_page_showed_and_only_those_can_be_followed(
    session: ToolkitSession, docs: LoopbackServer
) -> None:
    opened = step(session, "web.open")
    listed = step(session, "web.links", page=f":{docs.port}/")
    assert listed["page"] == opened["ref"]
    urls = [str(link["url"]) for link in listed["links"]]
    assert urls == [
        f"http://docs.test:{docs.port}/guide",
        f"http://docs.test:{docs.port}/missing",
    ]  # the off-origin link is counted on the page, never offered
    state = session.observe().state_ref
    follow = session.arguments("web.follow", state)
    assert [option.label.split()[0] for option in follow.domains[0].options] == urls


def test_files_list_offers_only_plain_files_and_a_symlink_is_never_readable(
    tmp_path: Path,
) -> None:
    write(tmp_path / "corpus" / "docs" / "a.md", "verify_token is documented here\n")
    (tmp_path / "outside.txt").write_text("secret\n", encoding="utf-8")
    (tmp_path / "corpus" / "docs" / "leak.md").symlink_to(tmp_path / "outside.txt")
    spec, task_dir = load_task(
        write(tmp_path / "t.toml", 'name = "w"\nsource = "workspace"\nreports_dir = "r"\n')
    )
    task = EvidenceTask(
        spec,
        {"root": "corpus", "markers": {"impl": "verify_token"}, "output": "w.json"},
        task_dir=task_dir,
        base_dir=tmp_path,
    )
    session = ToolkitSession(task)
    listing = step(session, "files.list")
    assert [item["path"] for item in listing["files"]] == ["docs/a.md"]
    assert listing["omissions"] == {"symlinks_refused": 1}
    state = session.observe().state_ref
    paths = session.arguments("files.read", state).domains[0].options
    assert [option.label for option in paths] == ["docs/a.md"]
    read = step(session, "files.read", path="docs/a.md")
    assert session.store.read(str(read["ref"])) == "verify_token is documented here\n"
