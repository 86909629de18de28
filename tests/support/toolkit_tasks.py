"""What the evidence-task tests share: task files, runtime inputs and the docs site.

The docs site (``serve_docs``) is three Chinese pages on ``docs.test`` (index, guide,
licence) with an off-origin link a crawl must never follow; ``make_task`` builds a web task
over it on the loopback network, clocked at the fixed test "now".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from external_query_service._clock import fixed_clock
from external_query_service.cli import main
from external_query_service.settings import NetworkSettings
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.toolkit import EvidenceTask, load_task
from tests.support.world import NOW

#: The two passages the docs site marks: its requirement and its licence.
REQUIREMENT = "需要 Python 3.11"
LICENCE = "MIT 许可证"


def write(path: Path, text: str) -> Path:
    """``text`` at ``path`` (UTF-8), its folders made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def web_task(folder: Path, **extra: str) -> Path:
    """``folder/task.toml``: the web task over the docs site (``extra``: more top-level keys,
    as TOML values)."""
    lines = [
        'name = "docs-requirements"',
        'description = "Quote the documented requirements."',
        'source = "web"',
        'reports_dir = "reports"',
        *(f"{key} = {value}" for key, value in extra.items()),
        "[budget]",
        "max_pages = 5",
        "max_depth = 2",
    ]
    return write(folder / "task.toml", "\n".join(lines) + "\n")


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The CLI run in this process: its exit code, stdout and stderr."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def network() -> NetworkSettings:
    """The loopback network, with ``docs.test`` and ``other.test`` resolving to it."""
    return NetworkSettings(
        allowed_networks=("127.0.0.1/32",),  # type: ignore[arg-type]
        resolve={"docs.test": "127.0.0.1", "other.test": "127.0.0.1"},
        timeout_s=5.0,
    )


def page(title: str, paragraphs: list[str], links: dict[str, str] | None = None) -> str:
    """A Chinese article page: ``paragraphs`` under ``title``, ``links`` (href → text) in its
    nav."""
    body = "".join(f"<p>{text}</p>" for text in paragraphs)
    anchors = "".join(f'<a href="{href}">{text}</a> ' for href, text in (links or {}).items())
    return (
        f'<html lang="zh-CN"><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><main><article><h1>{title}</h1>{body}</article></main>"
        f"<nav>{anchors}</nav></body></html>"
    )


def serve_docs(loopback: LoopbackServer) -> LoopbackServer:
    """index → guide → licence, plus an off-origin page the crawl must never touch."""
    port = loopback.port
    loopback.route(
        "/",
        Reply(
            body=f'<html><body><a href="/guide">Guide</a> <a href="/missing">Gone</a>'
            f'<a href="http://other.test:{port}/x">Other</a></body></html>'
        ),
        host="docs.test",
    )
    guide = page(
        "安装指南",
        [
            f"本项目{REQUIREMENT}或更高版本，安装前请先创建虚拟环境并升级 pip 到最新版本。",
            "安装完成后运行 example --version 检查版本号，再按照快速入门完成第一次配置。",
        ],
        {"/licence": "许可证说明", "/": "首页"},
    )
    loopback.route("/guide", Reply(body=guide), host="docs.test")
    loopback.route(
        "/licence",
        Reply(
            body=page(
                "许可证",
                [
                    f"本项目以 {LICENCE}发布，允许复制、修改和再发布，但须保留版权声明和许可声明。",
                    "第三方依赖各自遵循其许可证条款，发布前请检查依赖清单中的许可证信息是否兼容。",
                ],
            )
        ),
        host="docs.test",
    )
    loopback.route("/x", Reply(body="never"), host="other.test")
    return loopback


def web_inputs(server: LoopbackServer, **overrides: Any) -> dict[str, Any]:
    """Runtime inputs of the web task on ``server``'s docs site (``overrides`` replace keys)."""
    data: dict[str, Any] = {
        "url": f"http://docs.test:{server.port}/",
        "allowed_origins": [f"http://docs.test:{server.port}"],
        "markers": {"requirements": REQUIREMENT, "licence": LICENCE},
        "output": "run-1.json",
    }
    data.update(overrides)
    return data


def make_task(folder: Path, server: LoopbackServer, **overrides: Any) -> EvidenceTask:
    """The web task over ``server``'s docs site, on the loopback network at ``NOW``."""
    spec, task_dir = load_task(web_task(folder))
    return EvidenceTask(
        spec,
        web_inputs(server, **overrides),
        task_dir=task_dir,
        network=network(),
        clock=fixed_clock(NOW),
    )


def web_inputs_static() -> dict[str, Any]:
    """Valid web inputs for static checks: nothing is fetched, so the site is not served."""
    return {
        "url": "https://docs.example.org/start",
        "allowed_origins": ["https://docs.example.org"],
        "markers": {"requirements": REQUIREMENT, "licence": LICENCE},
        "output": "out/run.json",
    }
