"""The local_docs adapter over a real folder: matching, confinement, and path hygiene."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from external_query_service import ExternalQueryService, SettingsError
from external_query_service._clock import fixed_clock
from external_query_service._digests import sha256_digest
from external_query_service._evidence_store import EvidenceStore
from external_query_service.adapters import _local_docs as local_docs
from external_query_service.adapters._base import AdapterOutcome, AdapterRuntime
from external_query_service.adapters._local_docs import LocalDocsAdapter
from external_query_service.models import ExternalQueryPlan, Readiness
from external_query_service.net._fetch import ApiResponse, FetchedPage
from external_query_service.settings import AdapterSettings, NetworkSettings, Settings

NOW = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

INSTALL = """# 安装指南

本库需要 Python 3.11 或更新版本。

使用 pip 安装：运行 pip install external-query-service 即可完成安装。
"""
SETTINGS = """# 配置说明

在 settings.toml 的 network 段里设置 allowed_networks，允许访问私有网段。
超时时间由 timeout_s 控制，整体期限由 deadline_s 控制。
"""
RELEASES = """发布记录

0.1.0 版本第一次发布，包含天气与汇率两个事实接口。
"""
HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>缓存与证据存储</title></head>
<body><nav>首页 | 文档</nav>
<article><h1>缓存与证据存储</h1>
<p>证据存储按内容寻址保存每一页规范化后的正文，同样的正文只保存一次。</p>
<p>每条证据的摘录都指向存储中的偏移和长度，读取时最多返回一千二百个字符。</p>
<p>证据存储是线程安全的，只能追加，不能修改已经保存的正文。</p>
</article></body></html>
"""


class _NoNetwork:
    async def fetch(self, url: str) -> FetchedPage:
        raise AssertionError(f"local docs must not fetch: {url}")

    @property
    def base_url(self) -> str:
        raise AssertionError("local docs must not call an endpoint")

    async def get_json(self, path: str, params: object = None) -> ApiResponse:
        raise AssertionError("local docs must not call an endpoint")


def _adapter(
    root: Path | None,
    *,
    store: EvidenceStore | None = None,
    network: NetworkSettings | None = None,
) -> LocalDocsAdapter:
    runtime = AdapterRuntime(
        network=network or NetworkSettings(),
        fetcher=_NoNetwork(),
        endpoint=lambda base: _NoNetwork(),
        store=store if store is not None else EvidenceStore(),
        clock=fixed_clock(NOW),
    )
    table = {"kind": "local_docs", "id": "docs", **({"root": root} if root is not None else {})}
    return LocalDocsAdapter(AdapterSettings.model_validate(table), runtime)


def _plan(*queries: str) -> ExternalQueryPlan:
    return ExternalQueryPlan(
        question=queries[0],
        query_kind="documentation",
        search_queries=queries,
    )


def _gather(adapter: LocalDocsAdapter, plan: ExternalQueryPlan) -> AdapterOutcome:
    return asyncio.run(adapter.gather(plan))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    (root / "install.md").write_text(INSTALL, encoding="utf-8")
    (root / "guide" / "settings.md").write_text(SETTINGS, encoding="utf-8")
    (root / "releases.txt").write_text(RELEASES, encoding="utf-8")
    (root / "guide" / "store.html").write_text(HTML, encoding="utf-8")
    (root / "notes.json").write_text('{"pip install": "not a document type"}', encoding="utf-8")
    return root


def test_a_question_finds_the_file_that_answers_it(docs: Path) -> None:
    store = EvidenceStore()

    outcome = _gather(_adapter(docs, store=store), _plan("如何用 pip 安装"))

    assert outcome.status == "ok"
    best = outcome.evidence[0]
    assert best.url == "docs://docs/install.md"
    assert best.title == "安装指南"
    assert "pip install" in best.snippet
    assert best.ref is not None
    assert store.quote(best.ref, best.offset, best.length) == best.snippet
    assert best.content_digest == sha256_digest(store.quote(best.ref, 0, 100_000))
    assert best.raw_digest == sha256_digest(INSTALL.encode("utf-8"))
    assert (best.basis, best.provider_type, best.site) == ("page_body", "doc_search", "docs")
    assert best.published_at is None
    assert best.accessed_at == NOW
    assert best.gathered_for == "如何用 pip 安装"
    assert len({item.url for item in outcome.evidence}) == len(outcome.evidence) <= 3
    assert all(not item.url.endswith(".json") for item in outcome.evidence)


def test_a_nested_markdown_file_is_addressed_by_its_relative_path(docs: Path) -> None:
    outcome = _gather(_adapter(docs), _plan("allowed_networks 私有网段"))

    assert outcome.evidence[0].url == "docs://docs/guide/settings.md"
    assert outcome.evidence[0].title == "配置说明"


def test_an_html_file_goes_through_extraction_and_keeps_its_title(docs: Path) -> None:
    outcome = _gather(_adapter(docs), _plan("证据存储 按内容寻址 规范化正文"))

    best = outcome.evidence[0]
    assert best.url == "docs://docs/guide/store.html"
    assert best.title == "缓存与证据存储"
    assert "<p>" not in best.snippet
    assert best.raw_digest == sha256_digest(HTML.encode("utf-8"))


def test_a_text_file_without_a_heading_is_titled_by_its_name(docs: Path) -> None:
    outcome = _gather(_adapter(docs), _plan("0.1.0 版本 第一次发布"))

    best = outcome.evidence[0]
    assert best.url == "docs://docs/releases.txt"
    assert best.title == "releases.txt"


def test_nothing_relevant_is_empty_with_no_match(docs: Path) -> None:
    outcome = _gather(_adapter(docs), _plan("Kubernetes Helm chart values"))

    assert (outcome.status, outcome.reason) == ("empty", "no_match")
    assert outcome.evidence == ()
    assert outcome.detail["files_read"] == 4


def test_symlinks_to_a_file_or_folder_outside_the_root_are_refused(
    docs: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = "# 机密\n\n机密口令 zebra-quartz-7731 存放在根目录之外。\n"
    (outside / "secret.md").write_text(secret, encoding="utf-8")
    (docs / "linked.md").symlink_to(outside / "secret.md")
    (docs / "linkdir").symlink_to(outside, target_is_directory=True)

    outcome = _gather(_adapter(docs), _plan("机密口令 zebra-quartz-7731"))

    assert all("zebra" not in item.snippet for item in outcome.evidence)
    assert all("link" not in item.url for item in outcome.evidence)
    assert outcome.detail["symlinks_refused"] == 2


def test_a_fifo_is_skipped_without_blocking(docs: Path) -> None:
    os.mkfifo(docs / "pipe.md")

    outcome = _gather(_adapter(docs), _plan("如何用 pip 安装"))

    assert outcome.status == "ok"
    assert outcome.detail["non_regular_skipped"] == 1
    assert all("pipe" not in item.url for item in outcome.evidence)


def test_a_file_over_the_byte_cap_is_left_unread(docs: Path) -> None:
    (docs / "huge.md").write_text("# 安装\n\n" + "pip 安装 " * 400, encoding="utf-8")
    largest = max(len(text.encode("utf-8")) for text in (INSTALL, SETTINGS, RELEASES, HTML))
    network = NetworkSettings(max_page_bytes=largest)

    outcome = _gather(_adapter(docs, network=network), _plan("如何用 pip 安装"))

    assert outcome.detail["too_large"] == 1
    assert outcome.detail["files_read"] == 4
    assert outcome.evidence[0].url == "docs://docs/install.md"


def test_files_beyond_the_count_cap_are_reported_as_omitted(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_docs, "MAX_FILES", 2)

    outcome = _gather(_adapter(docs), _plan("如何用 pip 安装"))

    assert outcome.detail["files_read"] == 2
    assert outcome.detail["files_omitted"] == 2


def test_no_machine_path_leaves_the_adapter(docs: Path, tmp_path: Path) -> None:
    (docs / "linked.md").symlink_to(docs / "install.md")
    os.mkfifo(docs / "pipe.md")
    store = EvidenceStore()

    outcome = _gather(_adapter(docs, store=store), _plan("如何用 pip 安装", "allowed_networks"))

    assert outcome.evidence
    exposed = "".join(item.model_dump_json() for item in outcome.evidence) + str(outcome.detail)
    exposed += "".join(capture.model_dump_json() for capture in store.references())
    assert str(tmp_path) not in exposed
    assert "file:" not in exposed
    assert all(item.url.startswith("docs://docs/") for item in outcome.evidence)


def test_an_edited_file_is_read_again(docs: Path) -> None:
    adapter = _adapter(docs)
    first = _gather(adapter, _plan("如何用 pip 安装"))
    (docs / "install.md").write_text(INSTALL.replace("3.11", "3.12 及以上的"), encoding="utf-8")

    second = _gather(adapter, _plan("如何用 pip 安装"))

    assert first.evidence[0].raw_digest != second.evidence[0].raw_digest
    assert second.evidence[0].raw_digest == sha256_digest((docs / "install.md").read_bytes())


def test_a_root_that_is_not_a_folder_at_start_is_a_settings_error(tmp_path: Path) -> None:
    a_file = tmp_path / "file.md"
    a_file.write_text("# x\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"root is not a folder: .*nope"):
        _adapter(tmp_path / "nope")
    with pytest.raises(SettingsError, match=r"root is not a folder: .*file\.md"):
        _adapter(a_file)
    with pytest.raises(SettingsError, match=r"adapter 'docs' \(local_docs\): missing key 'root'"):
        _adapter(None)
    with pytest.raises(SettingsError, match="root is not a folder"):
        ExternalQueryService(Settings().with_docs(tmp_path / "nope"))


def test_a_root_that_vanishes_later_is_not_ready_and_gathers_nothing(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    adapter = _adapter(root)
    root.rmdir()

    assert adapter.readiness() == Readiness(ready=False, reason="root_missing")
    assert asyncio.run(adapter.probe()) == Readiness(ready=False, reason="root_missing")
    outcome = _gather(adapter, _plan("安装"))
    assert (outcome.status, outcome.reason) == ("failed", "root_missing")


def test_an_existing_folder_is_ready(docs: Path) -> None:
    adapter = _adapter(docs)

    assert asyncio.run(adapter.probe()) == Readiness(ready=True)
    assert adapter.capability.provider_type == "doc_search"
    assert adapter.capability.supported_query_kinds == ("documentation",)


@pytest.mark.parametrize(
    ("markdown", "title"),
    [
        ("# 安装指南\n正文", "安装指南"),
        ("## Closing hashes ##\r\nbody", "Closing hashes"),
        ("#   \n# Second heading", "Second heading"),
        ("# C# tips", "C# tips"),
        ("#nospace\ntext", ""),
        ("    # indented code, not a heading", ""),
    ],
)
def test_the_first_atx_heading_titles_a_markdown_file(markdown: str, title: str) -> None:
    assert local_docs._markdown_title(markdown) == title


def test_a_heading_line_full_of_spaces_and_hashes_is_read_to_its_end() -> None:
    # The old pattern backtracked cubically on this line; a file is untrusted input, so the
    # heading pattern must run in linear time.
    line = "# a" + " " * 20000 + "#" * 20000 + " " * 20000 + "b"
    assert (
        local_docs._markdown_title(line + "\n")
        == "a" + " " * 20000 + "#" * 20000 + " " * 20000 + "b"
    )


# --- the root is pinned ---------------------------------------------------------------------

OTHER = "# 机密\n\n安装口令 zebra-quartz-7731：pip 安装时请输入它。\n"


def _swap_for_a_symlink(docs: Path, tmp_path: Path) -> None:
    """Rename the root away and put a symlink to another folder where it was."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "install.md").write_text(OTHER, encoding="utf-8")
    docs.rename(tmp_path / "docs-moved")
    docs.symlink_to(other, target_is_directory=True)


def test_a_root_swapped_for_a_symlink_to_another_folder_is_refused(
    docs: Path, tmp_path: Path
) -> None:
    adapter = _adapter(docs)
    first = _gather(adapter, _plan("如何用 pip 安装"))
    _swap_for_a_symlink(docs, tmp_path)

    second = _gather(adapter, _plan("如何用 pip 安装"))

    assert first.status == "ok"
    assert (second.status, second.reason) == ("failed", "root_changed")
    assert second.evidence == ()


def test_a_root_swapped_before_the_first_question_is_refused_too(
    docs: Path, tmp_path: Path
) -> None:
    adapter = _adapter(docs)  # pinned here, not at the first gather
    _swap_for_a_symlink(docs, tmp_path)

    outcome = _gather(adapter, _plan("如何用 pip 安装"))

    assert (outcome.status, outcome.reason) == ("failed", "root_changed")


def test_a_root_replaced_by_another_real_folder_is_refused(docs: Path, tmp_path: Path) -> None:
    adapter = _adapter(docs)
    docs.rename(tmp_path / "docs-moved")
    docs.mkdir()
    (docs / "install.md").write_text(OTHER, encoding="utf-8")

    outcome = _gather(adapter, _plan("如何用 pip 安装"))

    assert (outcome.status, outcome.reason) == ("failed", "root_changed")


def test_a_root_named_through_a_symlink_is_read_from_its_target(docs: Path, tmp_path: Path) -> None:
    link = tmp_path / "current"
    link.symlink_to(docs, target_is_directory=True)

    outcome = _gather(_adapter(link), _plan("如何用 pip 安装"))

    assert outcome.status == "ok"
    assert outcome.evidence[0].url == "docs://docs/install.md"


def test_after_a_root_swap_the_answer_names_the_swap_and_quotes_nothing_from_the_other_folder(
    docs: Path, tmp_path: Path
) -> None:
    semantics = {"query_kind": "documentation"}
    with ExternalQueryService(Settings().with_docs(docs), clock=fixed_clock(NOW)) as service:
        before = service.answer("如何用 pip 安装", semantics)
        _swap_for_a_symlink(docs, tmp_path)
        after = service.answer("如何用 pip 安装", semantics)

    assert before.status == "answered"
    assert after.status == "insufficient_evidence"
    assert [(a.adapter_id, a.status, a.reason) for a in after.attempts] == [
        ("docs", "failed", "root_changed")
    ]
    assert "zebra" not in after.model_dump_json()
