"""The public-github method against a loopback imitation of the GitHub API and raw host."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from external_query_service.admission import ContractRejected, EvidencePlan, EvidenceReceipt
from external_query_service.cli import main
from external_query_service.methods._public_github import (
    ENV_API_URL,
    ENV_RAW_URL,
    PROVIDER_ID,
    GitHubEndpoints,
    PublicGitHub,
    github_endpoints,
    parse_source_url,
)
from external_query_service.settings import GitHubSettings, NetworkSettings
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.testing.server import json_reply
from tests.support.world import closed_port

SHA = "0123456789abcdef0123456789abcdef01234567"
README = f"https://github.com/octo/public/blob/{SHA}/README.md"
GUIDE = f"https://github.com/octo/public/blob/{SHA}/docs/guide.md"
PRIVATE = f"https://github.com/octo/private/blob/{SHA}/README.md"
SECRET = "SECRET-BODY-MARKER"
TEXT = "# LoopX\n\nLoopX reads public sources.\nNothing else here.\n"
START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def ticking_clock() -> Callable[[], datetime]:
    ticks = iter(range(10_000))

    def clock() -> datetime:
        return START + timedelta(seconds=next(ticks))

    return clock


def repo_reply(private: bool = False) -> Reply:
    return json_reply(
        {
            "full_name": "octo/public",
            "private": private,
            "visibility": "private" if private else "public",
        },
        headers={"Set-Cookie": "session=abc; Path=/"},
    )


NOT_FOUND = json_reply({"message": "Not Found", "note": SECRET}, status=404)


@pytest.fixture
def github(loopback: LoopbackServer) -> LoopbackServer:
    loopback.route("/repos/octo/public", repo_reply())
    loopback.route("/repos/octo/private", NOT_FOUND)
    loopback.route(
        f"/raw/octo/public/{SHA}/README.md",
        Reply(body=TEXT.encode(), content_type="text/plain; charset=utf-8"),
    )
    loopback.route(
        f"/raw/octo/public/{SHA}/docs/guide.md",
        Reply(404, f"404: Not Found {SECRET}", "text/plain"),
    )
    return loopback


def endpoints(server: LoopbackServer) -> GitHubEndpoints:
    return github_endpoints(GitHubSettings(api_url=server.url(""), raw_url=server.url("/raw")), {})


def method(server: LoopbackServer, clock: Callable[[], datetime] | None = None) -> PublicGitHub:
    return PublicGitHub(
        endpoints(server), NetworkSettings(timeout_s=5.0), clock=clock or ticking_clock()
    )


def run_plan(server: LoopbackServer, sources: list[str], terms: list[str]) -> EvidencePlan:
    async def go() -> EvidencePlan:
        github = method(server)
        try:
            return await github.plan(
                objective="Inspect public source",
                user_activity="Choose a source",
                decision="Whether a literal is present",
                evidence_kinds=["literal_match"],
                sources=sources,
                search_terms=terms,
            )
        finally:
            await github.aclose()

    return asyncio.run(go())


def run_execute(server: LoopbackServer, plan: Any) -> EvidenceReceipt:
    async def go() -> EvidenceReceipt:
        github = method(server)
        try:
            return await github.execute(plan)
        finally:
            await github.aclose()

    return asyncio.run(go())


def test_a_public_file_is_read_and_its_literal_matches_become_the_finding(
    github: LoopbackServer,
) -> None:
    plan = run_plan(github, [README], ["LoopX", "absent-term"])
    assert plan.selected_provider.provider_id == PROVIDER_ID
    assert plan.candidates[0].observed_by == "probe"
    receipt = run_execute(github, json.loads(plan.model_dump_json()))

    assert receipt.status == "succeeded"
    (source,) = receipt.sources
    assert source.source_ref == README
    assert source.finding == (
        '"LoopX": 2 literal match(es), first at line 1: # LoopX; "absent-term": no literal match'
    )
    assert source.content_digest == "sha256:" + hashlib.sha256(TEXT.encode()).hexdigest()
    assert source.publication_date is None
    assert datetime.fromisoformat(source.accessed_at) < datetime.fromisoformat(receipt.completed_at)
    # Visibility is checked when planning and again before the read.
    assert len(github.requests_to("/repos/octo/public")) == 2


def test_no_token_cookie_or_auth_header_is_ever_sent(
    github: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A token in the environment is never picked up, and the API answers set a cookie
    # that the second visibility check of the same repository must not send back.
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_should_never_be_sent")
    monkeypatch.setenv("GH_TOKEN", "ghp_should_never_be_sent")
    plan = run_plan(github, [README, GUIDE], ["LoopX"])
    run_execute(github, plan)
    assert len(github.requests_to("/repos/octo/public")) == 3
    for request in github.requests:
        assert request.method == "GET"
        assert not {"authorization", "cookie", "proxy-authorization"} & set(request.headers)


@pytest.mark.parametrize(
    "url",
    [PRIVATE, f"https://github.com/octo/missing/blob/{SHA}/README.md"],
    ids=["private", "missing"],
)
def test_a_private_or_missing_repository_is_refused_at_planning(
    github: LoopbackServer, url: str
) -> None:
    # Anonymous GitHub answers 404 for both; the loopback imitation does the same.
    with pytest.raises(ContractRejected) as caught:
        run_plan(github, [url], ["LoopX"])
    assert caught.value.reason == "repository_not_public"
    assert "HTTP 404" in str(caught.value)
    assert SECRET not in str(caught.value)
    assert not [request for request in github.requests if request.path.startswith("/raw/")]


def test_a_repository_reporting_private_is_refused(github: LoopbackServer) -> None:
    github.route("/repos/octo/public", repo_reply(private=True))
    with pytest.raises(ContractRejected) as caught:
        run_plan(github, [README], ["LoopX"])
    assert "repository not public" in str(caught.value)


def test_partial_success_keeps_the_file_that_was_read(github: LoopbackServer) -> None:
    plan = run_plan(github, [README, GUIDE], ["LoopX"])
    receipt = run_execute(github, plan)
    assert receipt.status == "succeeded"
    assert receipt.source_refs == (README,)
    assert f"{GUIDE}: not read; stopped at source file read (HTTP 404)" in receipt.limitations
    assert SECRET not in receipt.model_dump_json()


def test_a_file_that_is_not_utf8_fails_at_text_validation(github: LoopbackServer) -> None:
    github.route(
        f"/raw/octo/public/{SHA}/README.md",
        Reply(body="LoopX 中文".encode("gb18030"), content_type="text/plain"),
    )
    receipt = run_execute(github, run_plan(github, [README], ["LoopX"]))
    assert (receipt.status, receipt.sources) == ("failed", ())
    assert receipt.limitations[0] == (
        f"{README}: not read; stopped at source text validation (HTTP 200, not UTF-8 text)"
    )


def test_visibility_is_checked_again_before_every_read(github: LoopbackServer) -> None:
    plan = run_plan(github, [README], ["LoopX"])
    github.route("/repos/octo/public", NOT_FOUND)
    receipt = run_execute(github, plan)
    assert receipt.status == "failed"
    assert receipt.limitations[0] == (
        f"{README}: not read; stopped at repository visibility check (HTTP 404)"
    )
    assert not github.requests_to(f"/raw/octo/public/{SHA}/README.md")


def test_a_redirect_from_the_raw_host_is_not_followed(github: LoopbackServer) -> None:
    github.route(
        f"/raw/octo/public/{SHA}/README.md",
        Reply(302, b"", None, headers={"Location": "/elsewhere"}),
    )
    receipt = run_execute(github, run_plan(github, [README], ["LoopX"]))
    assert "stopped at source file read (HTTP 302)" in receipt.limitations[0]
    assert not github.requests_to("/elsewhere")


def test_a_transport_failure_names_the_step_and_the_network_without_its_text() -> None:
    with LoopbackServer() as server:
        server.route("/repos/octo/public", repo_reply())
        plan = run_plan(server, [README], ["LoopX"])
    # The same endpoints, now with nothing listening: no status, and no exception text.
    receipt = run_execute(server, plan)
    assert receipt.limitations[0] == (
        f"{README}: not read; stopped at repository visibility check "
        "(not reached: connection failed; no HTTP status)"
    )


def test_an_unreachable_github_is_reported_as_the_network_not_as_a_private_repository() -> None:
    nowhere = f"http://127.0.0.1:{closed_port()}"
    github = PublicGitHub(
        github_endpoints(GitHubSettings(api_url=nowhere, raw_url=f"{nowhere}/raw"), {}),
        NetworkSettings(timeout_s=5.0),
        clock=ticking_clock(),
    )

    async def go() -> EvidencePlan:
        try:
            return await github.plan(
                objective="o", user_activity="a", decision="d", evidence_kinds=["k"],
                sources=[README], search_terms=["LoopX"],
            )  # fmt: skip
        finally:
            await github.aclose()

    with pytest.raises(ContractRejected) as caught:
        asyncio.run(go())
    assert caught.value.reason == "github_unreachable"
    assert caught.value.detail == (
        "octo/public: visibility check not reached: connection failed; no HTTP status"
    )


def test_another_status_leaves_the_visibility_unknown(github: LoopbackServer) -> None:
    github.route("/repos/octo/public", json_reply({"message": SECRET}, status=503))
    with pytest.raises(ContractRejected) as caught:
        run_plan(github, [README], ["LoopX"])
    assert caught.value.reason == "visibility_unknown"
    assert "HTTP 503" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_cli_plan_against_an_unreachable_github_exits_3_naming_the_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv(ENV_API_URL, nowhere)
    monkeypatch.setenv(ENV_RAW_URL, f"{nowhere}/raw")
    code = main(
        ["evidence", "plan", "--public-github", "--objective", "o", "--user-activity", "a",
         "--decision", "d", "--evidence-kind", "k", "--source", README, "--search-term", "x",
         "--ledger", str(tmp_path / "ledger.sqlite3"), "--format", "json"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert (code, captured.out) == (3, "")
    error = json.loads(captured.err)
    assert (error["code"], error["exit_code"]) == ("github_unreachable", 3)
    assert "repository_not_public" not in captured.err


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://github.com/octo/public/blob/main/README.md", "full 40-hex commit"),
        ("https://github.com/octo/public/blob/v1.2.0/README.md", "full 40-hex commit"),
        (f"https://github.com/octo/public/blob/{SHA[:12]}/README.md", "full 40-hex commit"),
        (f"https://github.com/octo/public/blob/{SHA.upper()}/README.md", "full 40-hex commit"),
        (f"http://github.com/octo/public/blob/{SHA}/README.md", "only https"),
        (f"https://gitlab.com/octo/public/blob/{SHA}/README.md", "only https://github.com/"),
        (
            f"https://raw.githubusercontent.com/octo/public/{SHA}/README.md",
            "only https://github.com/",
        ),
        (f"https://user@github.com/octo/public/blob/{SHA}/README.md", "only https://github.com/"),
        (f"https://github.com/octo/public/tree/{SHA}/docs", "OWNER/REPO/blob"),
        (f"https://github.com/octo/public/blob/{SHA}/a/../README.md", "normal form"),
        (f"https://github.com/octo/public/blob/{SHA}/a//README.md", "unsafe segment"),
        (f"https://github.com/octo/public/blob/{SHA}/%2e%2e/%2E%2E/x/README.md", "unsafe segment"),
        (f"https://github.com/octo/public/blob/{SHA}/docs%2Fguide.md", "unsafe segment"),
        (f"https://github.com/octo/public/blob/{SHA}/docs%5Cguide.md", "unsafe segment"),
        (f"https://github.com/octo/public/blob/{SHA}/bad%zzescape.md", "unsafe segment"),
        (f"https://github.com:443/octo/public/blob/{SHA}/README.md", "normal form"),
        (f"https://github.com:8443/octo/public/blob/{SHA}/README.md", "only https://github.com/"),
        (f"https://github.com/octo/public/blob/{SHA}/README.md?plain=1", "no query"),
        (f"https://github.com/octo/public/blob/{SHA}", "OWNER/REPO/blob"),
    ],
)
def test_only_full_commit_file_urls_on_github_are_accepted(url: str, why: str) -> None:
    with pytest.raises(ContractRejected) as caught:
        parse_source_url(url)
    assert caught.value.reason == "unsupported_source_url"
    assert why in caught.value.detail.rsplit(": ", 1)[1]


def test_a_branch_url_is_refused_before_any_request(github: LoopbackServer) -> None:
    with pytest.raises(ContractRejected) as caught:
        run_plan(github, ["https://github.com/octo/public/blob/main/README.md"], ["LoopX"])
    assert caught.value.reason == "unsupported_source_url"
    assert github.requests == []


def test_a_commit_url_parses_into_its_parts() -> None:
    source = parse_source_url(GUIDE)
    assert (source.repository, source.commit, source.path) == ("octo/public", SHA, "docs/guide.md")


def test_endpoints_come_from_settings_and_environment() -> None:
    settings = GitHubSettings()
    assert github_endpoints(settings, {}) == GitHubEndpoints(
        "https://api.github.com", "https://raw.githubusercontent.com"
    )
    env = {ENV_API_URL: "http://127.0.0.1:9/", ENV_RAW_URL: "http://localhost:9/raw"}
    assert github_endpoints(settings, env) == GitHubEndpoints(
        "http://127.0.0.1:9", "http://localhost:9/raw"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://api.example.com",
        "ftp://127.0.0.1/",
        "https://ghp_token@api.github.com",
        "https://user:secret@api.github.com",
        "https://api.github.com/?access_token=ghp_token",
        "not a url",
    ],
)
def test_an_endpoint_that_is_not_plain_anonymous_https_is_refused(url: str) -> None:
    with pytest.raises(ContractRejected) as caught:
        github_endpoints(GitHubSettings(), {ENV_API_URL: url})
    assert caught.value.reason == "insecure_endpoint"
    assert "ghp_token" not in str(caught.value)
    assert "secret" not in str(caught.value)


def test_a_plan_made_for_other_endpoints_is_not_executed(github: LoopbackServer) -> None:
    plan = run_plan(github, [README], ["LoopX"])

    async def go() -> None:
        other = PublicGitHub(
            GitHubEndpoints("https://api.github.com", "https://raw.githubusercontent.com"),
            NetworkSettings(),
            clock=ticking_clock(),
        )
        try:
            await other.execute(plan)
        finally:
            await other.aclose()

    with pytest.raises(ContractRejected) as caught:
        asyncio.run(go())
    assert caught.value.reason == "endpoint_mismatch"


def test_cli_plans_and_executes_against_the_configured_endpoints(
    github: LoopbackServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(ENV_API_URL, github.url(""))
    monkeypatch.setenv(ENV_RAW_URL, github.url("/raw"))
    ledger = str(tmp_path / "ledger.sqlite3")
    common = ["--ledger", ledger, "--format", "json"]
    code = main(
        ["evidence", "plan", "--public-github", "--objective", "Inspect public source",
         "--user-activity", "Choose a source", "--decision", "Whether a literal is present",
         "--evidence-kind", "literal_match", "--source", README, "--source", GUIDE,
         "--search-term", "LoopX", *common]
    )  # fmt: skip
    plan_text = capsys.readouterr().out
    assert code == 0, plan_text
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan_text, encoding="utf-8")

    assert main(["evidence", "execute", "--plan-json", str(plan_file), *common]) == 0
    preview = json.loads(capsys.readouterr().out)
    assert (preview["authorized"], preview["sources"]) == (False, [README, GUIDE])
    assert not github.requests_to(f"/raw/octo/public/{SHA}/README.md")

    assert main(["evidence", "execute", "--plan-json", str(plan_file), "--execute", *common]) == 0
    receipt = json.loads(capsys.readouterr().out)
    assert receipt["status"] == "succeeded"
    assert [item["source_ref"] for item in receipt["sources"]] == [README]
    receipt_file = tmp_path / "execution.json"
    receipt_file.write_text(json.dumps(receipt), encoding="utf-8")
    assert main(["evidence", "receipt", "--plan-json", str(plan_file), "--receipt-json",
                 str(receipt_file), *common]) == 0  # fmt: skip
