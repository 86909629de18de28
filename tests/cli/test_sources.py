"""``ask`` as a newcomer meets it: a search service the settings point wrong at names its URL
and exits 3; pages that gave no text as fetched hint at the browser; the terminal shows the
answer without Markdown escapes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from external_query_service.cli import main
from external_query_service.cli._plain import plain_text
from external_query_service.testing import LoopbackServer
from tests.support.world import World, hit

NOW = "2026-11-30T10:00:00+08:00"
QUESTION = "What is new in the Rust release?"


def config(tmp_path: Path, base_url: str, **browser: str) -> Path:
    path = tmp_path / "live.toml"
    extra = "".join(f'{key} = "{value}"\n' for key, value in browser.items())
    path.write_text(
        f"""
[network]
allowed_networks = ["127.0.0.1/32"]
resolve = {{ "app.test" = "127.0.0.1" }}
{"[browser]" if extra else ""}
{extra}
[[adapters]]
kind = "searxng"
id = "searx"
base_url = "{base_url}"
""",
        encoding="utf-8",
    )
    return path


def ask(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    code = main(["ask", QUESTION, "--config", str(path), "--now", NOW, *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_search_service_that_refuses_connections_names_its_url_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}/searx"
    code, out, err = ask(config(tmp_path, url), capsys)
    assert code == 3
    assert out.startswith("External live query:")  # the answer is still printed
    assert err == (
        f"external-query: error: searx: {url} refused the connection (is the service "
        "running, on that port?); check its base_url in the settings\n"
    )


def test_a_search_service_answering_404_names_its_url_and_exits_3(
    loopback: LoopbackServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(loopback)
    url = world.base("/wrong-path")
    code, _out, err = ask(config(tmp_path, url), capsys)
    assert code == 3
    assert f"searx: {url} answered 404: nothing is served at that path" in err


SCRIPT_PAGE = (
    "<html><head><title>Rust release</title></head><body><div id='app'></div>"
    "<script>document.getElementById('app').textContent = 'Rust 1.99 was released';</script>"
    "</body></html>"
)


def test_a_page_only_scripts_write_hints_at_browser_fallback(
    loopback: LoopbackServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(loopback)
    page = world.page("app.test", "/news", SCRIPT_PAGE)
    world.results(QUESTION, [hit(page, "Rust release", "Rust 1.99 is out")])
    code, out, err = ask(config(tmp_path, world.base("/searx")), capsys)
    assert code == 0
    assert "insufficient_evidence" in out
    assert err == (
        "external-query: hint: result pages gave no readable text as fetched (app.test:"
        f'{loopback.port}); if their scripts write it, [browser] mode = "fallback" reads '
        "them (the [browser] extra and Chromium)\n"
    )


def test_the_terminal_shows_the_answer_without_markdown_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "network.md").write_text(
        "# Network **rules**\n\nThe verifier checks [network] allowed_networks before any "
        "page is read; each_source counts once.\n",
        encoding="utf-8",
    )
    argv = ["ask", "What does the verifier check?", "--docs", str(docs), "--now", NOW]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert main([*argv, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "\\[network\\] allowed\\_networks" in markdown
    assert "[network] allowed_networks" in text
    assert "\\" not in text
    assert "link: docs://docs/network.md" in text
    assert "link: `docs://docs/network.md`" in markdown


@pytest.mark.parametrize(
    ("markdown", "plain"),
    [
        ("a \\*\\*b\\*\\* c\\_d \\[x\\]", "a **b** c_d [x]"),
        ("see [the \\_page\\_](<https://a.test/p>)", "see the _page_ (https://a.test/p)"),
        ("link: <https://a.test/x?y=1>", "link: https://a.test/x?y=1"),
        ("link: `docs://docs/a.md`", "link: docs://docs/a.md"),
        ("&lt;script&gt; &amp;amp;", "<script> &amp;"),
        ("plain text, nothing to undo.", "plain text, nothing to undo."),
    ],
)
def test_plain_text_undoes_exactly_the_presenters_markup(markdown: str, plain: str) -> None:
    assert plain_text(markdown) == plain
