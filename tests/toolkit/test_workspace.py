"""Workspace tools: plain files under one root; links, escapes and FIFOs refused."""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

import pytest

from external_query_service._evidence_store import EvidenceStore
from external_query_service.toolkit import (
    BoundaryRefused,
    ToolkitError,
    UnsafePlatform,
    WorkspaceLimits,
    WorkspaceTools,
)

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "repo"
    (base / "src" / "pkg").mkdir(parents=True)
    (base / "docs").mkdir()
    (base / "src" / "pkg" / "core.py").write_text(
        "import os\n\n\ndef handler():\n    # VERIFY_SIGNATURE before use\n    return 1\n",
        encoding="utf-8",
    )
    (base / "docs" / "guide.md").write_text(
        "# Guide\r\nCall VERIFY_SIGNATURE first.\r\n", encoding="utf-8"
    )
    (base / ".git").mkdir()
    (base / ".git" / "config").write_text("VERIFY_SIGNATURE in a hidden file\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("VERIFY_SIGNATURE outside the root\n", encoding="utf-8")
    return base


def workspace(root: Path, **limits: int) -> WorkspaceTools:
    return WorkspaceTools(root, EvidenceStore(), limits=WorkspaceLimits(**limits))


def test_listing_shows_regular_files_and_counts_what_it_left_out(root: Path) -> None:
    (root / "link.py").symlink_to(root / "src" / "pkg" / "core.py")
    (root / "linked_dir").symlink_to(root / "docs", target_is_directory=True)
    listing = workspace(root).list()
    assert [item.path for item in listing.files] == ["docs/guide.md", "src/pkg/core.py"]
    assert listing.omissions == {"symlinks_refused": 2, "hidden_skipped": 1}


def test_listing_stops_at_the_file_limit_and_says_how_many_it_omitted(root: Path) -> None:
    for n in range(5):
        (root / f"note{n}.txt").write_text("x")
    listing = workspace(root, max_files=3).list()
    assert len(listing.files) == 3
    assert listing.omissions["files_omitted"] == 4


def test_reading_a_file_stores_its_text_with_lines_intact(root: Path) -> None:
    tools = workspace(root)
    capture = tools.read("docs/guide.md")
    text = tools._store.read(capture.ref)
    assert text == "# Guide\nCall VERIFY_SIGNATURE first.\n"
    assert tools._store.describe(capture.ref).source == "workspace:docs/guide.md"
    assert capture.raw_digest != capture.digest  # CRLF bytes vs unified text


def test_a_symlinked_file_is_refused_even_when_it_points_inside_the_root(root: Path) -> None:
    (root / "alias.py").symlink_to(root / "src" / "pkg" / "core.py")
    with pytest.raises(BoundaryRefused) as caught:
        workspace(root).read("alias.py")
    assert caught.value.reason == "symlink_refused"


def test_a_symlink_to_a_file_outside_the_root_is_refused(root: Path) -> None:
    (root / "leak.txt").symlink_to(root.parent / "outside.txt")
    with pytest.raises(BoundaryRefused) as caught:
        workspace(root).read("leak.txt")
    assert caught.value.reason == "symlink_refused"


def test_a_symlinked_folder_on_the_way_is_refused(root: Path) -> None:
    (root / "via").symlink_to(root.parent, target_is_directory=True)
    with pytest.raises(BoundaryRefused) as caught:
        workspace(root).read("via/outside.txt")
    assert caught.value.reason == "symlink_refused"
    assert "via" in caught.value.detail


@pytest.mark.parametrize("path", ["../outside.txt", "docs/../../outside.txt", "/etc/hostname"])
def test_a_path_escaping_the_root_is_refused(root: Path, path: str) -> None:
    with pytest.raises(BoundaryRefused) as caught:
        workspace(root).read(path)
    assert caught.value.reason == "path_escapes_root"


@needs_fifo
def test_a_fifo_is_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe.txt")
    tools = workspace(root)
    # Without O_NONBLOCK the open would wait for a writer forever; the guard only stops a
    # hung run, it does not time anything.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(tools.read, "pipe.txt")
        with pytest.raises(BoundaryRefused) as caught:
            future.result(timeout=30)
    assert caught.value.reason == "not_regular_file"
    listing = tools.list()
    assert listing.omissions["non_regular_skipped"] == 1
    result = tools.search("VERIFY_SIGNATURE")
    assert "pipe.txt" not in {match.path for match in result.matches}


def test_literal_search_points_every_match_at_its_line_in_a_capture(root: Path) -> None:
    tools = workspace(root)
    result = tools.search("VERIFY_SIGNATURE")
    assert [(m.path, m.line, m.column) for m in result.matches] == [
        ("docs/guide.md", 2, 6),
        ("src/pkg/core.py", 5, 7),
    ]
    for match in result.matches:
        assert tools._store.quote(match.ref, match.offset, match.length) == match.text
    assert result.files_searched == 2
    assert result.omissions == {"hidden_skipped": 1}
    assert tools.search("verify_signature").matches == ()  # case-sensitive, literal


def test_search_reports_binary_oversized_and_surplus_matches(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\x00\x01VERIFY_SIGNATURE")
    (root / "big.txt").write_text("VERIFY_SIGNATURE\n" * 200)
    (root / "many.txt").write_text("VERIFY_SIGNATURE\n" * 5)
    result = workspace(root, max_file_bytes=1000, max_matches=4).search("VERIFY_SIGNATURE")
    assert len(result.matches) == 4
    assert result.omissions["binary_skipped"] == 1
    assert result.omissions["too_large"] == 1
    assert result.omissions["matches_omitted"] == 3  # 7 matches in three text files


def test_reading_a_binary_or_oversized_file_fails_with_a_reason(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\x00" * 10)
    (root / "big.txt").write_text("x" * 2000)
    tools = workspace(root, max_file_bytes=1000)
    with pytest.raises(ToolkitError) as binary:
        tools.read("blob.bin")
    with pytest.raises(ToolkitError) as big:
        tools.read("big.txt")
    assert (binary.value.reason, big.value.reason) == ("binary_file", "file_too_large")


def test_reading_source_code_never_runs_it(root: Path) -> None:
    marker = root.parent / "ran.txt"
    (root / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nVERIFY_SIGNATURE = 1\n", encoding="utf-8"
    )
    tools = workspace(root)
    tools.read("evil.py")
    tools.search("VERIFY_SIGNATURE")
    assert not marker.exists()


def test_a_root_that_was_replaced_is_refused(root: Path, tmp_path: Path) -> None:
    tools = workspace(root)
    root.rename(tmp_path / "moved")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "docs").mkdir()
    (tmp_path / "repo" / "docs" / "guide.md").write_text("swapped")
    with pytest.raises(BoundaryRefused) as caught:
        tools.read("docs/guide.md")
    assert caught.value.reason == "root_changed"


def test_without_descriptor_relative_opens_the_tools_fail_closed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "supports_dir_fd", set())
    with pytest.raises(UnsafePlatform, match=r"os\.open\(dir_fd=\)"):
        workspace(root)


def test_without_o_nofollow_the_tools_fail_closed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "O_NOFOLLOW")
    with pytest.raises(UnsafePlatform, match="O_NOFOLLOW"):
        workspace(root)


def test_a_root_replaced_by_a_symlink_is_refused(root: Path, tmp_path: Path) -> None:
    tools = workspace(root)
    root.rename(tmp_path / "moved")
    (tmp_path / "repo").symlink_to(tmp_path / "moved", target_is_directory=True)
    with pytest.raises(BoundaryRefused) as caught:
        tools.read("docs/guide.md")
    assert caught.value.reason == "root_changed"


def test_a_root_that_was_removed_is_refused_with_a_reason(root: Path, tmp_path: Path) -> None:
    tools = workspace(root)
    root.rename(tmp_path / "moved")
    with pytest.raises(BoundaryRefused) as caught:
        tools.list()
    assert caught.value.reason == "root_changed"
