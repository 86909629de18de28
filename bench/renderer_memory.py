"""A rendered page allocating memory in a loop, against a plain page: Chromium's peak memory.

One ``BrowserProvider`` (the system Chromium) renders, in turns, a plain page and a page
whose script allocates JavaScript arrays in a loop (the same page as the test's), on
loopback. While each rendering runs, the resident memory of every process below this one
(Chromium's browser, zygote, GPU and renderer processes) is sampled every 10 ms; the script
prints min/median/max of each side's peak, the hog's peak over the plain page's (target:
at most 500 MiB), how the hog's renderings ended and the renderers the memory watch killed.
Linux only.

    python bench/renderer_memory.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service.browser import BrowserProvider
from external_query_service.errors import RenderFailed
from external_query_service.settings import BrowserSettings
from external_query_service.testing import World

MIB = 1024 * 1024
STORY = "湛江港集团11月20日发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨。"
HOG = (
    f"<p>{STORY}</p><script>const hold = []; let n = 0;"
    "function grow() { for (let i = 0; i < 8; i++) { n++; hold.push(new Array(1 << 20).fill(n)); }"
    " setTimeout(grow, 0); } grow();</script>"
)


def tree_rss() -> int:
    """Resident bytes of every process below this one."""
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
    tree, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    return sum(rss.get(pid, 0) for pid in tree)


async def peak_of(provider: BrowserProvider, url: str) -> tuple[int, str]:
    """Chromium's peak resident bytes while ``url`` renders, and how the rendering ended."""
    peak = [tree_rss()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            peak[0] = max(peak[0], tree_rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    session = await provider.session()
    try:
        await session.render(url)
        ended = "rendered"
    except RenderFailed as exc:
        ended = exc.reason
    finally:
        await session.close()
        stop.set()
        sampler.join()
    return peak[0], ended


def spread(values: list[float]) -> str:
    return (
        f"min {min(values) / MIB:.0f}, median {statistics.median(values) / MIB:.0f}, "
        f"max {max(values) / MIB:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with World() as world:
        plain = world.page("port.test", "/plain", f"<p>{STORY}</p>")
        hog = world.page("port.test", "/hog", HOG)
        provider = BrowserProvider(BrowserSettings(page_timeout_s=6.0), world.settings().network)
        peaks: dict[str, list[float]] = {"plain": [], "hog": []}
        endings: set[str] = set()
        try:
            provider.start()
            for _ in range(args.runs):
                for side, url in (("plain", plain), ("hog", hog)):
                    peak, ended = asyncio.run(peak_of(provider, url))
                    peaks[side].append(peak)
                    if side == "hog":
                        endings.add(ended)
            kills = getattr(provider, "memory_kills", "n/a")
        finally:
            provider.close()
    print(f"renderer memory, {args.runs} interleaved runs, load {os.getloadavg()[0]:.1f}:")
    print(f"  plain page peak (Chromium tree): {spread(peaks['plain'])}")
    print(f"  hog page peak   (Chromium tree): {spread(peaks['hog'])}")
    over = statistics.median(peaks["hog"]) - statistics.median(peaks["plain"])
    print(f"  median hog over median plain: {over / MIB:.0f} MiB (target <= 500)")
    print(f"  hog renderings ended: {sorted(endings)}; renderers killed: {kills}")


if __name__ == "__main__":
    main()
