"""The toolkit's browser source (``source = "browser"``): pages as the real Chromium shows
them, a caller's named tab reused and left open, the toolkit's own tabs closed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from external_query_service.browser import BrowserProvider
from external_query_service.errors import BoundaryRefused
from external_query_service.settings import BrowserSettings, NetworkSettings
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.toolkit import EvidenceTask, load_task

REQUIREMENT = "需要 Python 3.11"
#: A shell whose script writes the requirement into the page after load.
SHELL = """<!doctype html><html lang="zh-CN"><head><meta charset="utf-8"><title>安装</title>
</head><body><main id="app"></main><script>
fetch("/doc.json").then(r => r.json()).then(doc => {
  document.getElementById("app").innerHTML =
    "<article><h1>安装指南</h1>" + doc.map(p => "<p>" + p + "</p>").join("") + "</article>";
});
</script></body></html>"""
DOC = [
    f"本项目{REQUIREMENT}或更高版本，安装前请先创建虚拟环境并升级 pip 到最新版本。",
    "安装完成后运行 example --version 检查版本号，再按照快速入门完成第一次配置。",
]


def network() -> NetworkSettings:
    return NetworkSettings(
        allowed_networks=("127.0.0.1/32",),  # type: ignore[arg-type]
        resolve={"docs.test": "127.0.0.1", "other.test": "127.0.0.1"},
        timeout_s=5.0,
    )


def serve(server: LoopbackServer) -> str:
    server.route("/", Reply(body=SHELL), host="docs.test")
    doc = json.dumps(DOC).encode()
    server.route("/doc.json", Reply(body=doc, content_type="application/json"), host="docs.test")
    server.route(
        "/away",
        Reply(status=302, headers={"location": f"http://other.test:{server.port}/x"}),
        host="docs.test",
    )
    server.route("/x", Reply(body="never"), host="other.test")
    return f"http://docs.test:{server.port}"


def browser_task(folder: Path, origin: str, url: str, **options: str | None) -> EvidenceTask:
    (folder / "task.toml").write_text(
        'name = "docs-browser"\nsource = "browser"\nreports_dir = "reports"\n'
        "[budget]\nmax_pages = 3\nmax_depth = 0\n",
        encoding="utf-8",
    )
    spec, task_dir = load_task(folder / "task.toml")
    inputs = {
        "url": url,
        "allowed_origins": [origin],
        "markers": {"requirements": REQUIREMENT},
        "output": "run.json",
    }
    return EvidenceTask(spec, inputs, task_dir=task_dir, network=network(), **options)  # type: ignore[arg-type]


def test_a_browser_task_records_a_passage_from_a_script_written_page(
    tmp_path: Path, loopback: LoopbackServer, chromium: str
) -> None:
    origin = serve(loopback)
    task = browser_task(tmp_path, origin, f"{origin}/")

    async def go() -> None:
        try:
            await task.collect()
        finally:
            await task.aclose()

    asyncio.run(go())

    records = task.records()
    assert [record.category for record in records] == ["requirements"]
    assert REQUIREMENT in records[0].quote
    assert loopback.requests_to("/doc.json", host="docs.test")


def test_the_callers_named_tab_survives_close_and_the_toolkits_own_do_not(
    tmp_path: Path, loopback: LoopbackServer, chromium: str
) -> None:
    origin = serve(loopback)
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), network())

    async def go() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        session = await provider.session("research")
        await session.open_tab("mine")
        for tab in ("mine", None):  # in the caller's tab, then in a tab of the toolkit's
            folder = tmp_path / str(tab)
            folder.mkdir()
            task = browser_task(
                folder,
                origin,
                f"{origin}/",
                browser=provider,  # type: ignore[arg-type]
                browser_session="research",
                browser_tab=tab,
            )
            try:
                await task.collect()
                assert task.records()
                during = session.tab_names
            finally:
                await task.aclose()
        return during, session.tab_names, (await provider.session("research")).tab_names

    try:
        during, after, again = asyncio.run(go())
    finally:
        provider.close()

    assert during[0] == "mine"
    assert [name.split("-")[0] for name in during[1:]] == ["toolkit"]
    assert after == ("mine",)
    assert again == ("mine",)


def test_the_inputs_session_and_tab_render_in_the_callers_tab_and_leave_it_open(
    tmp_path: Path, loopback: LoopbackServer, chromium: str
) -> None:
    origin = serve(loopback)
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), network())
    (tmp_path / "task.toml").write_text(
        'name = "docs-browser"\nsource = "browser"\nreports_dir = "reports"\n'
        "[budget]\nmax_pages = 3\nmax_depth = 0\n",
        encoding="utf-8",
    )
    spec, task_dir = load_task(tmp_path / "task.toml")
    inputs = {
        "url": f"{origin}/",
        "allowed_origins": [origin],
        "markers": {"requirements": REQUIREMENT},
        "output": "run.json",
        "session": "research",
        "tab": "mine",
    }
    plain = {key: value for key, value in inputs.items() if key not in ("session", "tab")}

    async def go() -> tuple[tuple[str, ...], tuple[str, ...], str]:
        session = await provider.session("research")
        await session.open_tab("mine")
        task = EvidenceTask(spec, inputs, task_dir=task_dir, network=network(), browser=provider)
        try:
            await task.collect()
            during = session.tab_names
        finally:
            await task.aclose()
        return during, session.tab_names, task.inputs_digest

    try:
        during, after, digest = asyncio.run(go())
    finally:
        provider.close()

    assert during == ("mine",)  # every page in the caller's tab: no tab of the toolkit's
    assert after == ("mine",)  # and it is left open
    # Where pages are rendered is not what the task is: the digest is the plain inputs'.
    from external_query_service.toolkit._taskfile import validate_inputs

    assert digest == validate_inputs(plain).digest


def test_a_redirect_off_the_origins_is_refused_before_it_is_requested(
    tmp_path: Path, loopback: LoopbackServer, chromium: str
) -> None:
    origin = serve(loopback)
    task = browser_task(tmp_path, origin, f"{origin}/away")

    async def go() -> None:
        try:
            await task.web.open(f"{origin}/away")  # type: ignore[union-attr]
        finally:
            await task.aclose()

    with pytest.raises(BoundaryRefused) as refused:
        asyncio.run(go())

    assert refused.value.reason == "origin_not_allowed"
    assert not loopback.requests_to("/x", host="other.test")


def test_run_task_takes_session_and_tab_as_inputs(
    tmp_path: Path, loopback: LoopbackServer, chromium: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from external_query_service.cli import main

    origin = serve(loopback)
    (tmp_path / "task.toml").write_text(
        'name = "docs-browser"\nsource = "browser"\nreports_dir = "reports"\n'
        "[budget]\nmax_pages = 3\nmax_depth = 0\n",
        encoding="utf-8",
    )
    (tmp_path / "settings.toml").write_text(
        '[network]\nallowed_networks = ["127.0.0.1/32"]\ntimeout_s = 5.0\n'
        '[network.resolve]\n"docs.test" = "127.0.0.1"\n"other.test" = "127.0.0.1"\n'
        f'[browser]\nexecutable = "{chromium}"\n',
        encoding="utf-8",
    )
    inputs = {
        "url": f"{origin}/",
        "allowed_origins": [origin],
        "markers": {"requirements": REQUIREMENT},
        "output": "run.json",
        "session": "research",
        "tab": "mine",
    }
    code = main(
        [
            "run-task",
            str(tmp_path / "task.toml"),
            "--inputs",
            json.dumps(inputs),
            "--config",
            str(tmp_path / "settings.toml"),
            "--policy",
            "walk",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["receipt"]["exists"] is True
    assert (tmp_path / "reports" / "run.json").is_file()
