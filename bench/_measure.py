"""What several benches measure the same way: a spread of timings, and the resident memory
of a process tree (read from ``/proc``, Linux only)."""

from __future__ import annotations

import os
import statistics
from pathlib import Path


def spread(values: list[float]) -> str:
    """``values`` (seconds) as min, median and max in milliseconds."""
    return (
        f"min {min(values) * 1000:.0f} ms, median {statistics.median(values) * 1000:.0f} ms, "
        f"max {max(values) * 1000:.0f} ms"
    )


def tree_rss(*, itself: bool = True) -> int:
    """Resident bytes of every process below this one, and of this one unless ``itself`` is
    false."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    tree, frontier = ({os.getpid()} if itself else set()), {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    return sum(rss.get(pid, 0) for pid in tree)
