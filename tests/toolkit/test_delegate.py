"""Delegation: a scripted loopback model runs evidence tasks through a ToolkitSession."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from external_query_service.llm import ChatCompletionsClient
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.toolkit import (
    EvidenceTask,
    ToolkitError,
    ToolkitSession,
    load_task,
)
from tests.support.delegation import (
    KEY_ENV,
    SECRET,
    WEB_SCRIPT,
    Chooser,
    archived,
    chosen_ids,
    delegate,
    model_config,
    pick,
    reply_content,
    step_reply,
    view,
    web_session,
)
from tests.support.llm_chat import ChatServer, answer_json, api_error, completion, logprob_tokens
from tests.support.toolkit_tasks import (
    REQUIREMENT,
    make_task,
    run_cli,
    web_inputs,
    web_inputs_static,
    web_task,
    write,
)
from tests.support.world import NOW

WEB_PAGES = ("/", "/guide", "/licence")


def plain(tool: str, **labels: str) -> Chooser:
    """A scripted step without log-probabilities."""

    def reply(body: dict[str, Any]) -> Reply:
        shown = view(body)
        return step_reply(shown, tool, chosen_ids(shown, tool, labels))

    return reply


def done() -> Chooser:
    return lambda body: step_reply(view(body), None, [], done=True)


# -- completing ------------------------------------------------------------------------------


def test_a_web_task_completes_by_delegation_with_a_matching_report_and_every_step_archived(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*WEB_SCRIPT)
    session = web_session(tmp_path, docs, chat)
    archive = tmp_path / "steps.jsonl"

    result = delegate(session, archive=archive)

    assert result.status == "completed", result.stopped_because
    assert [step.tool for step in result.steps] == [
        "web.open_link",
        "web.open_link",
        "web.open_link",
        "record_evidence",
        "record_evidence",
        "save_report",
    ]
    assert all(step.ok and step.gated and step.chosen_by == "model" for step in result.steps)
    saved = tmp_path / "reports" / "run-1.json"
    assert result.report_saved is True
    assert result.receipt.matches is True
    assert result.report_path == str(saved.resolve())
    assert result.receipt.digest is not None
    report = json.loads(saved.read_text(encoding="utf-8"))
    assert {record["category"] for record in report["records"]} == {"requirements", "licence"}
    assert result.cost.steps == 6
    assert result.cost.model_calls == 6
    assert result.cost.tokens == 6 * 15
    assert result.failing_checks == ()
    for path in WEB_PAGES:
        assert len(docs.requests_to(path, host="docs.test")) == 1
    assert docs.requests_to("/missing", host="docs.test") == []

    lines = archived(archive)
    assert [line["event"] for line in lines] == ["start", *["turn"] * 6, "end"]
    for line, step in zip(lines[1:-1], result.steps, strict=True):
        assert line["observation_digest"].startswith("sha256:")
        assert line["reply"]["step"]["tool"] == step.tool
        assert line["gate"]["gated"] is True
        assert all(figure["passed"] for figure in line["gate"]["figures"])
        assert line["ran"]["arguments"] == step.arguments
        assert line["result"]["ok"] is True
    assert lines[-1]["result"]["status"] == "completed"
    # The loop asked for log-probabilities with the task's top_logprobs.
    assert chat.bodies[0]["logprobs"] is True
    assert chat.bodies[0]["top_logprobs"] == 5


def workspace_session(folder: Path, chat: ChatServer, **delegation: Any) -> ToolkitSession:
    write(folder / "corpus" / "src" / "auth.py", "def check(t):\n    return verify_token(t)\n")
    write(folder / "corpus" / "README.md", "# Auth\n\nTokens are checked by verify_token.\n")
    table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in delegation.items())
    spec, task_dir = load_task(
        write(
            folder / "ws.toml",
            'name = "ws"\nsource = "workspace"\nreports_dir = "reports"\n'
            + (f"[delegation]\n{table}" if table else ""),
        )
    )
    task = EvidenceTask(
        spec,
        {
            "root": "corpus",
            "queries": ["verify_token"],
            "markers": {"implementation": "return verify_token"},
            "output": "ws.json",
        },
        task_dir=task_dir,
        base_dir=folder,
    )
    return ToolkitSession(task, model=ChatCompletionsClient(chat.settings()))


def test_a_workspace_task_completes_by_delegation_and_ungated_steps_say_so(
    tmp_path: Path, chat: ChatServer
) -> None:
    chat.then(
        plain("files.search", query="verify_token"),
        plain("record_evidence", category="implementation"),
        plain("save_report"),
    )
    session = workspace_session(tmp_path, chat)
    archive = tmp_path / "ws.jsonl"

    result = delegate(session, "Find where tokens are verified.", archive=archive)

    assert result.status == "completed", result.stopped_because
    report = json.loads((tmp_path / "reports" / "ws.json").read_text(encoding="utf-8"))
    assert [record["source"] for record in report["records"]] == ["workspace:src/auth.py"]
    assert result.receipt.matches is True
    assert [step.gated for step in result.steps] == [False, False, False]
    turns = [line for line in archived(archive) if line["event"] == "turn"]
    assert [line["gate"]["gated"] for line in turns] == [False, False, False]
    assert turns[0]["gate"]["why_not"] == "no log-probabilities in the reply"


# -- refusing --------------------------------------------------------------------------------


def test_a_url_not_on_offer_is_refused_never_fetched_and_stops_the_run_after_three(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    guide = f"http://docs.test:{docs.port}/guide"

    def names_a_url(body: dict[str, Any]) -> Reply:
        return step_reply(view(body), "web.open_link", [guide])

    chat.then(
        pick("web.open_link", link="(entry)"),
        names_a_url,
        names_a_url,
        names_a_url,
        pick("web.open_link", link="(entry)"),
    )
    session = web_session(tmp_path, docs, chat)
    archive = tmp_path / "steps.jsonl"

    result = delegate(session, archive=archive)

    assert result.status == "refused_too_often"
    assert result.cost.refusals == 3
    assert [step.tool for step in result.steps] == ["web.open_link", "save_report"]
    assert result.steps[-1].chosen_by == "loop"  # save_incomplete: the loop saved it
    assert docs.requests_to("/guide", host="docs.test") == []
    assert len(chat.bodies) == 4  # the fifth scripted reply was never asked for
    refused = [line["refused"] for line in archived(archive) if "refused" in line]
    assert [item["reason"] for item in refused] == ["option_not_offered"] * 3
    assert guide in refused[0]["detail"]
    # The model was told why, in the next prompt.
    assert "refused" in view(chat.bodies[2])["feedback"]
    assert "checks still failing: requirements (no_record), licence (no_record)" in (
        result.stopped_because
    )


def test_a_path_not_on_offer_is_refused_and_never_read(tmp_path: Path, chat: ChatServer) -> None:
    (tmp_path / "outside.txt").write_text("return verify_token secret\n", encoding="utf-8")

    def names_a_path(body: dict[str, Any]) -> Reply:
        shown = view(body)
        return step_reply(shown, "files.read", ["../outside.txt"])

    chat.then(plain("files.list"), names_a_path, plain("files.read", path="src/auth.py"), done())
    session = workspace_session(tmp_path, chat)

    result = delegate(session, "Find where tokens are verified.")

    assert result.cost.refusals == 1
    assert "option_not_offered: '../outside.txt'" in view(chat.bodies[2])["feedback"]
    assert [step.tool for step in result.steps] == ["files.list", "files.read", "save_report"]
    sources = {capture.source for capture in session.store.references()}
    assert sources == {"workspace:src/auth.py"}
    assert result.status == "incomplete"
    assert "the model said it is done" in result.stopped_because


def test_a_stale_state_ref_is_refused_and_nothing_runs_for_it(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    first: dict[str, str] = {}

    def opens(body: dict[str, Any]) -> Reply:
        shown = view(body)
        first["state_ref"] = shown["state_ref"]
        return step_reply(
            shown, "web.open_link", chosen_ids(shown, "web.open_link", {"link": "(entry)"})
        )

    def stale(body: dict[str, Any]) -> Reply:
        shown = view(body)
        ids = chosen_ids(shown, "web.open_link", {"link": "/guide"})
        return step_reply(shown, "web.open_link", ids, state_ref=first["state_ref"])

    def unknown(body: dict[str, Any]) -> Reply:
        shown = view(body)
        ids = chosen_ids(shown, "web.open_link", {"link": "/guide"})
        return step_reply(shown, "web.open_link", ids, state_ref="state:9:made-up")

    chat.then(opens, stale, unknown, done())
    session = web_session(tmp_path, docs, chat)

    result = delegate(session)

    assert result.cost.refusals == 2
    assert [step.tool for step in result.steps] == ["web.open_link", "save_report"]
    assert docs.requests_to("/guide", host="docs.test") == []
    feedback = [view(body).get("feedback", "") for body in chat.bodies]
    assert "stale_state_ref" in feedback[2]
    assert "unknown_state_ref" in feedback[3]


def test_a_malformed_reply_is_refused_and_counted(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(answer_json({"tool": "web.open"}), completion("not json"), answer_json([]))
    result = delegate(web_session(tmp_path, docs, chat))
    assert result.status == "refused_too_often"
    assert result.cost.refusals == 3
    assert docs.requests == []


# -- budgets ---------------------------------------------------------------------------------


def test_the_step_budget_stops_the_run_before_the_next_step_is_asked_for(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*WEB_SCRIPT)
    result = delegate(web_session(tmp_path, docs, chat), max_steps=2)
    assert result.status == "budget_exhausted"
    assert result.stopped_because.startswith("max_steps: 2 steps taken")
    assert [step.tool for step in result.steps] == ["web.open_link", "web.open_link", "save_report"]
    assert len(chat.bodies) == 2
    assert docs.requests_to("/licence", host="docs.test") == []
    assert result.budget.max_steps == 2


def test_a_reply_past_the_token_budget_is_not_executed(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*WEB_SCRIPT)
    result = delegate(web_session(tmp_path, docs, chat), max_tokens=20)
    assert result.status == "budget_exhausted"
    assert result.stopped_because.startswith("max_tokens: 30 of 20 tokens used")
    assert len(chat.bodies) == 2  # the second reply was received, and not acted on
    assert docs.requests_to("/guide", host="docs.test") == []
    assert result.cost.tokens == 30


def test_a_reply_after_the_deadline_is_not_executed(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    def slow(body: dict[str, Any]) -> Reply:
        reply = pick("web.open_link", link="(entry)")(body)
        reply.delay_s = 2.0
        return reply

    chat.then(slow)
    result = delegate(web_session(tmp_path, docs, chat), timeout_s=0.5)
    assert result.status == "budget_exhausted"
    assert result.stopped_because.startswith("timeout")
    assert docs.requests == []
    assert result.cost.seconds < 2.0
    assert [step.tool for step in result.steps] == ["save_report"]


def test_the_model_failing_stops_the_run_with_its_reason(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(pick("web.open_link", link="(entry)"), api_error(500, "overloaded", "server_error"))
    result = delegate(web_session(tmp_path, docs, chat))
    assert result.status == "model_failed"
    assert "http_status: HTTP 500: overloaded" in result.stopped_because
    assert result.cost.model_calls == 2


# -- incomplete ------------------------------------------------------------------------------


def test_a_task_whose_checks_cannot_pass_ends_incomplete_naming_them(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(
        pick("web.open_link", link="(entry)"),
        pick("web.open_link", link="/guide"),
        pick("record_evidence", category="requirements"),
        done(),
    )
    session = web_session(
        tmp_path, docs, chat, markers={"requirements": REQUIREMENT, "security": "漏洞报告流程"}
    )
    result = delegate(session)
    assert result.status == "incomplete"
    assert result.failing_checks == ("security",)
    assert "checks still failing: security (no_record)" in result.stopped_because
    assert result.report_saved is True  # save_incomplete defaults to true
    assert result.steps[-1].chosen_by == "loop"


def test_a_task_that_keeps_incomplete_reports_unsaved_offers_no_save_and_saves_none(
    tmp_path: Path, chat: ChatServer
) -> None:
    chat.then(plain("files.list"), done())
    session = workspace_session(tmp_path, chat, save_incomplete=False)
    result = delegate(session, "Find where tokens are verified.")
    assert result.status == "incomplete"
    assert result.report_saved is False
    assert not (tmp_path / "reports").exists()
    assert "the report was not saved" in result.stopped_because
    offered = [item["tool"] for item in view(chat.bodies[0])["tools_on_offer"]]
    assert "save_report" not in offered


# -- confidence ------------------------------------------------------------------------------


def uncertain(tool: str, probability: float, **labels: str) -> Chooser:
    """Choose ``tool`` with the ids by label, each id at ``probability``."""

    def reply(body: dict[str, Any]) -> Reply:
        shown = view(body)
        ids = chosen_ids(shown, tool, labels)
        return step_reply(shown, tool, ids, weights=dict.fromkeys(ids, probability))

    return reply


def two_way(tool: str, chosen: float, runner_up: float, **labels: str) -> Chooser:
    """Choose ``tool``'s last parameter by label at ``chosen``, one other option at
    ``runner_up`` (the remaining probability goes to that one too if only two)."""

    def reply(body: dict[str, Any]) -> Reply:
        shown = view(body)
        ids = chosen_ids(shown, tool, labels)
        content = reply_content(shown, tool, ids, note="x")
        offer = next(item for item in shown["tools_on_offer"] if item["tool"] == tool)
        parameter = offer["parameters"][-1]
        pool = [
            o["id"] for o in parameter.get("options") or parameter["options_by_parent"][ids[-2]]
        ]
        other = next(value for value in pool if value != ids[-1])
        tables = {
            tool: {tool: 0.99, "save_report": 0.01},
            ids[-1]: {ids[-1]: chosen, other: runner_up},
        }
        return completion(content, logprobs=logprob_tokens(content, tables))

    return reply


def two_captures_with_the_marker(
    folder: Path, chat: ChatServer, **delegation: Any
) -> ToolkitSession:
    write(folder / "corpus" / "a.py", "return verify_token(a)\n")
    write(folder / "corpus" / "b.py", "return verify_token(b)\n")
    return workspace_session(folder, chat, **delegation)


def test_an_unclear_match_choice_is_asked_again_once_then_stops_the_run(
    tmp_path: Path, chat: ChatServer
) -> None:
    chat.then(
        plain("files.search", query="verify_token"),
        two_way("record_evidence", 0.45, 0.40, category="implementation", passage="a.py"),
        two_way("record_evidence", 0.50, 0.45, category="implementation", passage="a.py"),
    )
    session = two_captures_with_the_marker(tmp_path, chat)
    archive = tmp_path / "steps.jsonl"
    result = delegate(session, "Find where tokens are verified.", archive=archive)

    assert result.status == "uncertain_choice"
    assert "passage" in result.stopped_because
    assert session.task is not None
    assert session.task.records() == ()
    assert "not clear enough" in view(chat.bodies[2])["feedback"]
    gates = [line["gate"] for line in archived(archive) if "gate" in line]
    assert [gate["passed"] for gate in gates] == [True, False, False]
    figure = gates[1]["figures"][-1]
    assert (figure["field"], figure["selection"]) == ("passage", "match")
    assert figure["probability"] == pytest.approx(0.45 / 0.85, abs=1e-3)
    assert figure["passed"] is False


def test_a_clear_answer_to_the_second_ask_runs(tmp_path: Path, chat: ChatServer) -> None:
    chat.then(
        plain("files.search", query="verify_token"),
        two_way("record_evidence", 0.45, 0.40, category="implementation", passage="a.py"),
        two_way("record_evidence", 0.90, 0.05, category="implementation", passage="a.py"),
        plain("save_report"),
    )
    result = delegate(two_captures_with_the_marker(tmp_path, chat), "Find it.")
    assert result.status == "completed", result.stopped_because
    assert [step.tool for step in result.steps] == [
        "files.search",
        "record_evidence",
        "save_report",
    ]


def test_an_explore_choice_needs_less_certainty_than_a_match_choice(
    tmp_path: Path, chat: ChatServer
) -> None:
    # files.read's path is an explore parameter: 0.35 clears 0.30 with no margin needed.
    chat.then(
        plain("files.search", query="verify_token"),
        two_way("files.read", 0.35, 0.34, path="a.py"),
        done(),
    )
    archive = tmp_path / "steps.jsonl"
    result = delegate(two_captures_with_the_marker(tmp_path, chat), "Find it.", archive=archive)
    assert [step.tool for step in result.steps][:2] == ["files.search", "files.read"]
    assert result.steps[1].gated is True
    gates = [line["gate"] for line in archived(archive) if "gate" in line]
    figure = next(gate for gate in gates if gate["gated"])["figures"][-1]
    assert (figure["field"], figure["selection"], figure["passed"]) == ("path", "explore", True)
    # Normalized over the offered paths it is about 0.51: short of a match choice's 0.55.
    assert 0.30 <= figure["probability"] < 0.55


def test_the_thresholds_are_the_tasks_to_set(tmp_path: Path, chat: ChatServer) -> None:
    chat.then(
        plain("files.search", query="verify_token"),
        two_way("record_evidence", 0.45, 0.40, category="implementation", passage="a.py"),
        plain("save_report"),
    )
    session = two_captures_with_the_marker(tmp_path, chat, min_probability=0.4, min_margin=0.0)
    result = delegate(session, "Find it.")
    assert result.status == "completed", result.stopped_because


# -- one route per session -------------------------------------------------------------------


def test_a_session_that_operated_directly_refuses_to_delegate(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    session = web_session(tmp_path, docs, chat)
    assert session.observe().delegation.ready is True
    seen = session.observe()
    url = session.arguments("web.open", seen.state_ref).domains[0].options[0].id
    assert asyncio.run(session.operate("web.open", {"url": url}, seen.state_ref)).ok
    after = session.observe().delegation
    assert (after.ready, after.reason, after.route) == (False, "route_direct", "direct")
    with pytest.raises(ToolkitError) as caught:
        delegate(session)
    assert caught.value.reason == "route_taken"
    assert "histories never merge" in str(caught.value)
    assert chat.bodies == []


def test_a_delegated_session_refuses_direct_operations_and_a_second_delegation(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*WEB_SCRIPT)
    session = web_session(tmp_path, docs, chat)
    result = delegate(session)
    seen = session.observe()
    assert seen.delegation.route == "delegated"
    assert seen.delegation.goal == result.goal
    assert seen.delegation.status == "completed"
    assert seen.receipt is not None
    assert seen.receipt.matches is True
    ref = session.arguments("evidence.read", seen.state_ref).domains[0].options[0].id
    offset = session.arguments("evidence.read", seen.state_ref, {"ref": ref}).domains[0]
    with pytest.raises(ToolkitError) as caught:
        asyncio.run(
            session.operate(
                "evidence.read", {"ref": ref, "offset": offset.options[0].id}, seen.state_ref
            )
        )
    assert caught.value.reason == "route_taken"
    with pytest.raises(ToolkitError) as again:
        delegate(session)
    assert again.value.reason == "delegation_done"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [({"model": None}, "no_model"), ({"direct_only": True}, "direct_only")],
)
def test_delegation_is_not_ready_without_a_model_or_on_a_direct_only_session(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer, kwargs: dict[str, Any], reason: str
) -> None:
    options: dict[str, Any] = {"model": ChatCompletionsClient(chat.settings())} | kwargs
    session = ToolkitSession(make_task(tmp_path, docs), **options)
    assert (session.observe().delegation.ready, session.observe().delegation.reason) == (
        False,
        reason,
    )
    with pytest.raises(ToolkitError) as caught:
        delegate(session)
    assert caught.value.reason == reason
    assert ToolkitSession(model=options["model"]).observe().delegation.reason in (
        "no_task",
        "direct_only",
    )


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [({"max_steps": 0}, "bad_budget"), ({"timeout_s": -1.0}, "bad_budget")],
)
def test_a_bad_budget_or_goal_is_refused_before_anything_runs(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer, kwargs: dict[str, Any], reason: str
) -> None:
    session = web_session(tmp_path, docs, chat)
    with pytest.raises(ToolkitError) as caught:
        delegate(session, **kwargs)
    assert caught.value.reason == reason
    with pytest.raises(ToolkitError) as empty:
        delegate(web_session(tmp_path, docs, chat), "   ")
    assert empty.value.reason == "empty_goal"
    assert chat.bodies == []
    assert session.observe().delegation.route is None


# -- the archive -----------------------------------------------------------------------------


def test_the_archive_refuses_a_symlink_and_keeps_the_key_out(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    with pytest.raises(ToolkitError) as caught:
        delegate(web_session(tmp_path, docs, chat), archive=tmp_path / "link.jsonl")
    assert caught.value.reason == "symlink_refused"

    monkeypatch.setenv(KEY_ENV, SECRET)

    def echoes_the_key(body: dict[str, Any]) -> Reply:
        shown = view(body)
        content = reply_content(shown, None, [], note=f"key {SECRET}")
        return completion(content)

    chat.then(echoes_the_key)
    session = ToolkitSession(
        make_task(tmp_path / "keyed", docs),
        model=ChatCompletionsClient(chat.settings(api_key_env=KEY_ENV)),
    )
    archive = tmp_path / "keyed.jsonl"
    result = delegate(session, archive=archive)
    assert chat.requests_to("/v1/chat/completions")[0].headers["authorization"] == (
        f"Bearer {SECRET}"
    )
    assert SECRET not in archive.read_text(encoding="utf-8")
    assert "[redacted]" in archive.read_text(encoding="utf-8")
    assert result.status == "incomplete"
    assert SECRET not in result.model_dump_json()
    assert "key [redacted]" in result.stopped_because


# -- the CLI ---------------------------------------------------------------------------------


def test_run_task_delegates_to_the_configured_model_and_no_output_holds_the_key(
    tmp_path: Path,
    docs: LoopbackServer,
    chat: ChatServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    chat.then(*WEB_SCRIPT)
    archive = tmp_path / "steps.jsonl"
    given = write(tmp_path / "inputs.json", json.dumps(web_inputs(docs)))
    argv = [
        "run-task",
        str(web_task(tmp_path)),
        "--inputs-json",
        str(given),
        "--config",
        str(model_config(tmp_path, chat, key_env=KEY_ENV)),
        "--goal",
        "Quote the requirements and the licence.",
        "--archive",
        str(archive),
        "--now",
        NOW.isoformat(),
    ]
    code, out, err = run_cli(argv, capsys)

    assert code == 0, err
    printed = json.loads(out)
    assert printed["delegation"]["status"] == "completed"
    assert printed["receipt"]["matches"] is True
    assert len(printed["delegation"]["steps"]) == 6
    assert [line["event"] for line in archived(archive)][-1] == "end"
    # The key went to the endpoint, and nowhere else.
    assert all(
        request.headers["authorization"] == f"Bearer {SECRET}"
        for request in chat.requests_to("/v1/chat/completions")
    )
    report = tmp_path / "reports" / "run-1.json"
    for text in (out, err, archive.read_text(encoding="utf-8"), report.read_text(encoding="utf-8")):
        assert SECRET not in text
        assert SECRET[-12:] not in text


def test_run_task_takes_the_model_flags_without_a_config_section(
    tmp_path: Path, chat: ChatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.then(
        plain("files.search", query="verify_token"),
        plain("record_evidence", category="implementation"),
        plain("save_report"),
    )
    workspace_session(tmp_path, chat)  # writes the corpus and the task file
    given = write(
        tmp_path / "inputs.json",
        json.dumps(
            {
                "root": "corpus",
                "markers": {"implementation": "return verify_token"},
                "output": "ws.json",
            }
        ),
    )
    code, out, err = run_cli(
        [
            "run-task",
            str(tmp_path / "ws.toml"),
            "--inputs-json",
            str(given),
            "--llm-base-url",
            chat.base_url,
            "--llm-model",
            "fake-model",
            "--max-steps",
            "5",
        ],
        capsys,
    )
    assert code == 0, err
    delegation = json.loads(out)["delegation"]
    assert delegation["budget"]["max_steps"] == 5
    # No goal given and no description: the default goal names the required categories.
    assert "implementation" in delegation["goal"]
    assert view(chat.bodies[0])["goal"] == delegation["goal"]


def test_run_task_exits_3_or_4_when_a_delegated_run_stops_short(
    tmp_path: Path, chat: ChatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.then(plain("files.list"), done(), plain("files.list"), done())
    for number, (keep, expected) in enumerate([(True, 3), (False, 4)]):
        folder = tmp_path / f"run{number}"
        workspace_session(folder, chat, save_incomplete=keep)
        given = write(
            folder / "inputs.json",
            json.dumps({"root": "corpus", "markers": {"impl": "nowhere"}, "output": "o.json"}),
        )
        code, out, _ = run_cli(
            [
                "run-task",
                str(folder / "ws.toml"),
                "--inputs-json",
                str(given),
                "--llm-base-url",
                chat.base_url,
                "--llm-model",
                "m",
            ],
            capsys,
        )
        assert code == expected
        printed = json.loads(out)
        assert printed["delegation"]["status"] == "incomplete"
        assert printed["delegation"]["failing_checks"] == ["impl"]
        assert (folder / "reports" / "o.json").exists() is keep


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "walk", "--goal", "x"], "--goal: only a delegated run (--policy model)"),
        (["--policy", "model"], "--policy model needs a model"),
        (["--llm-base-url", "http://example.org/v1", "--llm-model", "m"], "https"),
        (["--llm-model", "m"], "--llm-*: base_url"),
    ],
)
def test_run_task_refuses_model_flags_that_do_not_add_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    task = web_task(tmp_path)
    given = write(tmp_path / "inputs.json", json.dumps(web_inputs_static()))
    code, out, err = run_cli(["run-task", str(task), "--inputs-json", str(given), *extra], capsys)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1
