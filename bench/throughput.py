"""Questions per second on one service: 200 distinct questions, 8 distinct pages each.

The world runs in a child process (its own interpreter, so its HTTP serving does not share
the service's interpreter lock): a SearXNG that answers each question's search after
``--latency-ms`` with 8 hits, and 8 article pages per question (20-60 KB of boilerplate-heavy
HTML each, generated deterministically, every page under a site name of its own), each after
``--latency-ms``. Nothing is shared between questions, so every page is fetched and analysed.

The service (default settings, ``[cache]`` on) answers the questions ``--concurrency`` at a
time, once with ``[analysis] processes = 0`` (pages analysed in a thread of the service's
process) and once with the pool (``--processes``, default one per usable core). Printed for
each: questions/s, p50 and p95 latency, the per-question deadline and p95/deadline, and the
outcomes by status. Targets on 2 cores: >= 8.3 questions/s with the pool (1.8x the 4.6 of
analysis in-thread), p95 < deadline / 4.

    python bench/throughput.py [--questions 200] [--pages 8] [--concurrency 20]
        [--latency-ms 50] [--processes N] [--only pool|thread] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import multiprocessing
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.execution._analysis_pool import usable_cores
from external_query_service.testing import Reply, World, hit, json_reply, searx_body
from external_query_service.testing.server import RecordedRequest

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
TARGET_QPS = 1.8 * 4.6

PLACES = [
    "广州", "深圳", "珠海", "湛江", "汕头", "佛山", "东莞", "中山", "江门", "茂名",
    "肇庆", "惠州", "梅州", "汕尾", "河源", "阳江", "清远", "潮州", "揭阳", "云浮",
]  # fmt: skip
TOPICS = [
    ("地铁新线", "线路", "开通", "站点"),
    ("港口吞吐量", "集装箱", "吞吐", "码头"),
    ("台风防御", "降雨", "预警", "转移"),
    ("新能源汽车产业", "电池", "产量", "工厂"),
    ("旧城改造", "街区", "拆迁", "安置"),
    ("高校招生", "录取", "分数线", "专业"),
    ("机场扩建", "航站楼", "跑道", "旅客"),
    ("文旅消费", "游客", "景区", "收入"),
    ("跨海大桥", "通车", "桥梁", "交通"),
    ("海洋渔业", "渔船", "休渔", "产量"),
]
FILLER = [
    "相关部门表示将继续加强统筹协调，确保各项工作有序推进。",
    "业内人士认为，这一变化将对区域经济产生深远影响。",
    "据了解，项目前期已经完成多轮论证和公开征求意见。",
    "市民普遍关注后续的配套措施以及实施的具体时间表。",
    "记者在现场看到，施工人员正在进行最后阶段的调试工作。",
    "专家建议在推进过程中充分听取基层群众的意见和建议。",
    "数据显示，今年以来相关指标保持稳中有升的良好态势。",
    "下一步，当地将围绕重点领域出台更多针对性的支持政策。",
]


def question(n: int) -> str:
    place = PLACES[n % len(PLACES)]
    topic = TOPICS[(n // len(PLACES)) % len(TOPICS)][0]
    return f"{place}{topic}第{n // (len(PLACES) * len(TOPICS)) + 1}期最新进展如何？"


def page_html(n: int, k: int) -> str:
    """Page ``k`` of question ``n``: 20-60 KB, deterministic, about the question's topic."""
    rng = random.Random(n * 1000 + k)
    place = PLACES[n % len(PLACES)]
    topic, *words = TOPICS[(n // len(PLACES)) % len(TOPICS)]
    target = rng.randint(20_000, 60_000)
    published = (NOW - timedelta(days=rng.randint(0, 6))).date().isoformat()
    title = f"{place}{topic}最新进展：第{k + 1}篇报道"
    nav = "".join(f'<li><a href="/channel/{i}">频道{i}</a></li>' for i in range(40))
    related = "".join(
        f'<li><a href="/news/{rng.randint(1, 99999)}">{rng.choice(PLACES)}要闻速览第{i}期</a></li>'
        for i in range(20)
    )
    script = "<script>window.dataLayer=[];" + "var t=1;" * 200 + "</script>"
    head = (
        f'<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8"><title>{title}</title>'
        f'<meta property="article:published_time" content="{published}">'
        f"<style>{'.c{color:#333}' * 100}</style>{script}</head><body>"
        f'<div class="cookie">本站使用 Cookie 以改善体验。</div><header><nav><ul>{nav}</ul></nav>'
        f"</header><main><article><h1>{title}</h1><p class='byline'>发布时间：{published}</p>"
    )
    tail = (
        f"</article></main><aside><h3>相关阅读</h3><ul>{related}</ul></aside>"
        "<footer><p>版权所有 © 示例新闻网</p><p>联系我们 | 广告服务 | 隐私政策</p></footer>"
        "</body></html>"
    )
    paragraphs = []
    size = len(head.encode()) + len(tail.encode())
    index = 0
    while size < target:
        facts = (
            f"{place}{topic}第{index + 1}项进展：{words[0]}方面新增{rng.randint(2, 90)}处，"
            f"{words[1]}同比增长百分之{rng.randint(1, 30)}，{words[2]}工作按计划推进。"
        )
        text = facts + "".join(rng.choice(FILLER) for _ in range(rng.randint(2, 5)))
        paragraph = f"<p>{html.escape(text, quote=False)}</p>\n"
        paragraphs.append(paragraph)
        size += len(paragraph.encode())
        index += 1
    return head + "".join(paragraphs) + tail


def page_url(n: int, k: int) -> str:
    return f"http://news-{n}-{k}.example.cn/article/{n}-{k}.html"


def _serve_world(questions: int, pages: int, latency_ms: int, pipe: Connection) -> None:
    """The world process: build every page, serve until the parent says stop."""
    results = {
        question(n): [
            hit(page_url(n, k), f"{question(n)} 报道{k + 1}", question(n), "2026-11-28")
            for k in range(pages)
        ]
        for n in range(questions)
    }

    def search(request: RecordedRequest) -> Reply:
        query = request.query.get("q", [""])[0]
        return json_reply(searx_body(query, results.get(query, [])))

    with World() as world:
        for n in range(questions):
            for k in range(pages):
                world.route(page_url(n, k), Reply(body=page_html(n, k)), latency_ms=latency_ms)
        searx = world.searxng()
        world.route(f"{searx['base_url']}/search", search, latency_ms=latency_ms)
        # ``processes: None`` is the service's own default (one worker per usable core); a
        # test world's settings analyse in a thread unless told otherwise.
        settings = world.settings(
            searx,
            network={"max_pages": pages, "deadline_s": 20.0},
            analysis={"processes": None},
        )
        # ``connect_to`` alone takes the pages' hosts to loopback: a ``resolve`` entry for
        # each of the 1,600 would enter every answer's hashed envelope, a cost no real
        # deployment (a handful of overrides at most) pays.
        network = settings.network
        resolve = {host: ip for host, ip in network.resolve.items() if "news-" not in host}
        settings = settings.model_copy(
            update={"network": network.model_copy(update={"resolve": resolve})}
        )
        pipe.send(settings.model_dump(mode="json"))
        pipe.recv()


@contextmanager
def served_world(questions: int, pages: int, latency_ms: int) -> Iterator[tuple[Settings, int]]:
    """The loopback world in a process of its own (spawned: it shares nothing with the process
    measured): the settings that reach it, and its pid. Stopped when the block ends."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    world = context.Process(
        target=_serve_world, args=(questions, pages, latency_ms, theirs), daemon=True
    )
    world.start()
    try:
        assert world.pid is not None
        yield Settings.from_mapping(ours.recv()), world.pid
    finally:
        ours.send("stop")
        world.join(30)


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    wall: float = 0.0
    cpu_main: float = 0.0
    cpu_workers: float = 0.0
    cpu_world: float = 0.0

    def report(self, title: str, deadline_s: float) -> None:
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered)
        p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
        qps = len(ordered) / self.wall
        print(f"{title}:")
        print(f"  {len(ordered)} questions in {self.wall:.1f} s: {qps:.2f} questions/s")
        print(
            f"  latency p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms; deadline "
            f"{deadline_s:.0f} s, p95/deadline {p95 / deadline_s:.3f} (target < 0.25)"
        )
        print(f"  outcomes: {dict(sorted(self.outcomes.items()))}")
        done = len(ordered)
        print(
            f"  CPU per question: {self.cpu_main / done * 1000:.0f} ms in the service's process, "
            f"{self.cpu_workers / done * 1000:.0f} ms in analysis workers "
            f"({self.cpu_world / done * 1000:.0f} ms in the world's process)"
        )


async def drive(service: ExternalQueryService, questions: list[str], concurrency: int) -> Run:
    run = Run()
    pending = iter(questions)

    async def worker() -> None:
        for text in pending:
            started = time.perf_counter()
            answer = await service.aanswer(text)
            run.latencies.append(time.perf_counter() - started)
            run.outcomes[answer.status + (f" ({answer.reason})" if answer.reason else "")] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    run.wall = time.perf_counter() - started
    return run


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    settings: Settings,
    questions: list[str],
    concurrency: int,
    world_pid: int,
    profile: str | None = None,
) -> Run:
    async with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        await service.awarm_up()  # the pipeline, and the pool's workers when there are any
        await service.aanswer(question(len(questions)))  # connections, first-question paths
        workers = service.analysis.pids()
        before = [cpu_s(pid) for pid in (os.getpid(), world_pid, *workers)]
        if profile:
            import cProfile

            profiler = cProfile.Profile()  # the event loop's thread, while questions run
            profiler.enable()
        run = await drive(service, questions, concurrency)
        if profile:
            profiler.disable()
            profiler.dump_stats(profile)
        after = [cpu_s(pid) for pid in (os.getpid(), world_pid, *workers)]
        run.cpu_main = after[0] - before[0]
        run.cpu_world = after[1] - before[1]
        run.cpu_workers = sum(after[2:]) - sum(before[2:])
        return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--processes", type=int, default=None, help="pool size (default: cores)")
    parser.add_argument("--only", choices=["pool", "thread"], help="run one configuration")
    parser.add_argument(
        "--profile", help="write a cProfile of the event loop's thread to FILE.thread/.pool"
    )
    args = parser.parse_args()

    with served_world(args.questions + 1, args.pages, args.latency_ms) as (base, world_pid):
        questions = [question(n) for n in range(args.questions)]
        deadline = base.network.deadline_s
        print(
            f"{args.questions} questions x {args.pages} pages, concurrency {args.concurrency}, "
            f"{args.latency_ms} ms latency on search and pages"
        )
        runs = [("thread", 0), ("pool", args.processes)]
        for name, processes in runs:
            if args.only and args.only != name:
                continue
            analysis = {} if processes is None else {"processes": processes}
            settings = base.model_copy(
                update={"analysis": base.analysis.model_copy(update=analysis)}
            )
            profile = f"{args.profile}.{name}" if args.profile else None
            result = asyncio.run(measure(settings, questions, args.concurrency, world_pid, profile))
            size = settings.analysis.processes or usable_cores()
            label = (
                "analysis in a thread ([analysis] processes = 0)"
                if processes == 0
                else f"analysis pool ({size} worker processes)"
            )
            result.report(label, deadline)
            if name == "pool":
                qps = len(result.latencies) / result.wall
                verdict = "met" if qps >= TARGET_QPS else "NOT met"
                print(f"  target >= {TARGET_QPS:.1f} questions/s: {verdict}")


if __name__ == "__main__":
    main()
