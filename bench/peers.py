"""This project beside the pipeline an engineer would write instead, on one loopback world.

    python bench/peers.py [--questions 120] [--pages 8] [--concurrency 20] [--latency-ms 50]
        [--rounds 3] [--busy] [--processes N] [--only PEER ...] [--host-collector]

The world is ``throughput.py``'s (a SearXNG and 8 distinct 20-60 KB Chinese article pages per
question, every reply after ``--latency-ms``), served from a process of its own. Each round
runs every peer once, in a fresh process of its own (so no peer inherits another's caches or
memory), in alternating order from round to round, so a machine that gets busier or quieter
weighs on every peer alike:

- **ours**: ``ExternalQueryService`` with default settings (``[analysis] processes`` workers,
  one per usable core unless ``--processes``), its process's garbage collector set once warm
  as ``external-query serve`` sets its own (``[server] gc_threshold`` and ``gc_freeze``;
  ``--host-collector`` leaves CPython's defaults, as a host embedding the library would);
- **plain**: a plain asyncio pipeline — httpx fetches the search and its pages,
  ``trafilatura.extract`` in a 2-process ``ProcessPoolExecutor``, the texts cut into chunks
  of at most 360 characters at sentence ends, BM25 (k1 1.5, b 0.75; one term per CJK
  character, lower-cased words otherwise) keeps the top 5;
- **haystack**: Haystack's LinkContentFetcher → HTMLToDocument → DocumentSplitter →
  InMemoryBM25Retriever, when ``haystack`` is importable (else it is skipped, saying so).

Per peer and round: questions/s, p50/p95 latency, CPU per question (user + system time of the
peer's process and of its worker processes, read from ``/proc``; "own" is the peer's process
alone, which for ours is the service without its analysis workers) and RSS (the peer's process
plus its workers, ``VmRSS`` after the last question). Printed: min/median/max over the rounds,
the ratios ours/plain of the medians, and the machine's load average. ``--busy`` keeps one
more CPU-bound process (a Python loop) running on the host while the peers run.

Linux only (``/proc``). Figures on a shared machine are indicative; the ratios of interleaved
runs are the thing to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from throughput import NOW, question, served_world

from external_query_service import ExternalQueryService, Settings, fixed_clock, tune_collector

PLAIN_WORKERS = 2
CHUNK_CHARS = 360
TOP_K = 5
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TERM = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_SENTENCE_END = re.compile(r"(?<=[。！？!?.])\s*|\n+")


# -- /proc readings -------------------------------------------------------------------------


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- one run of one peer (in its own process) -----------------------------------------------


async def _drive(
    answer: Callable[[str], Any], questions: Sequence[str], concurrency: int
) -> dict[str, Any]:
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    pending = iter(questions)

    async def lane() -> None:
        for text in pending:
            started = time.perf_counter()
            outcomes[str(await answer(text))] += 1
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "qps": len(ordered) / wall,
        "p50": statistics.median(ordered),
        "p95": ordered[max(0, round(0.95 * len(ordered)) - 1)],
        "outcomes": dict(outcomes),
    }


def _measured(
    pids: Callable[[], Sequence[int]],
) -> Callable[[], tuple[tuple[float, float], float]]:
    """A reading of ((CPU seconds of this process, of this process and ``pids()``), RSS MB
    of them all)."""

    def read() -> tuple[tuple[float, float], float]:
        every = [os.getpid(), *pids()]
        own = cpu_s(os.getpid())
        total = own + sum(cpu_s(pid) for pid in every[1:])
        return (own, total), sum(rss_mb(pid) for pid in every)

    return read


def _figures(
    before: tuple[float, float], after: tuple[float, float], rss: float, questions: int
) -> dict[str, float]:
    """CPU per question of the peer's own process (``own_q``) and of it with its workers
    (``cpu_q``), and the RSS."""
    return {
        "own_q": (after[0] - before[0]) / questions,
        "cpu_q": (after[1] - before[1]) / questions,
        "rss": rss,
    }


async def _ours(
    settings: Settings, questions: Sequence[str], concurrency: int, tune: bool = True
) -> dict[str, Any]:
    async with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        await service.awarm_up()
        if tune:
            tune_collector(settings.server.gc_threshold, freeze=settings.server.gc_freeze)
        await service.aanswer(question(len(questions)))  # connections, first-question paths
        read = _measured(service.analysis.pids)
        cpu_before, _ = read()

        async def answer(text: str) -> str:
            result = await service.aanswer(text)
            return result.status

        run = await _drive(answer, questions, concurrency)
        cpu_after, rss = read()
    return {**run, **_figures(cpu_before, cpu_after, rss, len(questions))}


def _loopback(connect_to: dict[str, str]) -> Callable[[str], tuple[str, str]]:
    """``url`` → (the loopback URL the world serves it at, its Host header)."""

    def mapped(url: str) -> tuple[str, str]:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or ""
        target = connect_to.get(f"{host}:{port}", f"{host}:{port}")
        return urlunsplit((parts.scheme, target, parts.path, parts.query, "")), parts.netloc

    return mapped


def _extract(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html) or ""


def _chunks(text: str) -> list[str]:
    """``text`` cut at sentence ends into pieces of at most ``CHUNK_CHARS`` characters."""
    out: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > CHUNK_CHARS:
            out.append(sentence[:CHUNK_CHARS])
            sentence = sentence[CHUNK_CHARS:]
        if len(current) + len(sentence) > CHUNK_CHARS:
            out.append(current)
            current = ""
        current += sentence
    if current.strip():
        out.append(current)
    return [chunk for chunk in out if chunk.strip()]


def _bm25_top(query: str, chunks: Sequence[str], k: int = TOP_K) -> list[str]:
    """The ``k`` chunks BM25 ranks highest for ``query``."""
    docs = [Counter(_TERM.findall(chunk.lower())) for chunk in chunks]
    if not docs:
        return []
    lengths = [sum(doc.values()) for doc in docs]
    average = sum(lengths) / len(docs) or 1.0
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc.keys())
    wanted = set(_TERM.findall(query.lower()))
    idf = {t: math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted}
    scores = []
    for index, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        score = 0.0
        for term in wanted:
            tf = doc.get(term, 0)
            if tf:
                score += idf[term] * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / average))
        scores.append((-score, index))
    return [chunks[index] for _, index in sorted(scores)[:k]]


async def _plain(settings: Settings, questions: Sequence[str], concurrency: int) -> dict[str, Any]:
    import httpx

    mapped = _loopback(settings.network.connect_to)
    searx = str(getattr(settings.adapters[0], "base_url", "")).rstrip("/")
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(PLAIN_WORKERS) as pool:
        # Start every worker and import trafilatura in it. The calls go in together: a pool
        # whose processes are spawned (as in this peer's own spawned process) starts one only
        # when no worker is idle, so warming them one after another could leave a single
        # worker, and the one started later under load would go uncounted.
        warm = "<html><body><p>warm</p></body></html>"
        await asyncio.gather(
            *(loop.run_in_executor(pool, _extract, warm) for _ in range(PLAIN_WORKERS))
        )
        workers = list(pool._processes)  # the bench reads their CPU time and memory
        if len(workers) != PLAIN_WORKERS:
            raise RuntimeError(f"the plain peer started {len(workers)} of {PLAIN_WORKERS} workers")
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=20.0, limits=limits) as client:

            async def get(url: str, **params: str) -> httpx.Response:
                target, host = mapped(url)
                return await client.get(target, params=params, headers={"Host": host})

            async def answer(text: str) -> str:
                found = (await get(f"{searx}/search", q=text, format="json")).json()
                urls = [item["url"] for item in found["results"][: settings.network.max_pages]]
                pages = await asyncio.gather(*(get(url) for url in urls), return_exceptions=True)
                bodies = [p.text for p in pages if isinstance(p, httpx.Response) and p.is_success]
                texts = await asyncio.gather(
                    *(loop.run_in_executor(pool, _extract, body) for body in bodies)
                )
                top = _bm25_top(text, [c for t in texts for c in _chunks(t)])
                return "answered" if top else "nothing"

            await answer(question(len(questions)))
            read = _measured(lambda: workers)
            cpu_before, _ = read()
            run = await _drive(answer, questions, concurrency)
            cpu_after, rss = read()
    return {**run, **_figures(cpu_before, cpu_after, rss, len(questions))}


async def _haystack(
    settings: Settings, questions: Sequence[str], concurrency: int
) -> dict[str, Any]:
    import httpx
    from haystack.components.converters import HTMLToDocument
    from haystack.components.fetchers import LinkContentFetcher
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    mapped = _loopback(settings.network.connect_to)
    searx = str(getattr(settings.adapters[0], "base_url", "")).rstrip("/")

    def one(text: str) -> str:
        target, host = mapped(f"{searx}/search")
        found = httpx.get(target, params={"q": text, "format": "json"}, headers={"Host": host})
        urls = [mapped(item["url"])[0] for item in found.json()["results"]]
        store = InMemoryDocumentStore()
        fetched = LinkContentFetcher().run(urls=urls[: settings.network.max_pages])["streams"]
        documents = HTMLToDocument().run(sources=fetched)["documents"]
        split = DocumentSplitter(split_by="sentence", split_length=3)
        split.warm_up()
        store.write_documents(split.run(documents=documents)["documents"])
        top = InMemoryBM25Retriever(store, top_k=TOP_K).run(query=text)["documents"]
        return "answered" if top else "nothing"

    async def answer(text: str) -> str:
        return await asyncio.to_thread(one, text)

    read = _measured(lambda: ())
    cpu_before, _ = read()
    run = await _drive(answer, questions, concurrency)
    cpu_after, rss = read()
    return {**run, **_figures(cpu_before, cpu_after, rss, len(questions))}


PEERS: dict[str, Callable[..., Any]] = {"ours": _ours, "plain": _plain, "haystack": _haystack}


def _peer_main(
    name: str,
    settings: dict[str, Any],
    count: int,
    concurrency: int,
    pipe: Connection,
    host_collector: bool = False,
) -> None:
    questions = [question(n) for n in range(count)]
    loaded = Settings.from_mapping(settings)
    if name == "ours":
        result = asyncio.run(_ours(loaded, questions, concurrency, tune=not host_collector))
    else:
        result = asyncio.run(PEERS[name](loaded, questions, concurrency))
    pipe.send(result)


def haystack_missing() -> str | None:
    """Why the haystack peer cannot run here (None when it can): Haystack not installed, or
    its sentence splitter lacking NLTK or NLTK's sentence model (the splitter's warm-up asks
    NLTK to download the model; offline that fails, and the peer is skipped)."""
    try:
        from haystack.components.preprocessors import DocumentSplitter
    except ImportError:
        return "haystack is not installed in this environment"
    try:
        DocumentSplitter(split_by="sentence", split_length=3).warm_up()
    except (ImportError, LookupError) as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip("* ")), "")
        return f"haystack's sentence splitter cannot start ({type(exc).__name__}: {first})"
    return None


def _busy_loop() -> None:
    while True:
        sum(range(10_000))


@contextmanager
def busy_core(wanted: bool) -> Iterator[None]:
    """One more CPU-bound process for the block's length, when ``wanted``: the host that
    another program keeps busy."""
    if not wanted:
        yield
        return
    busy = multiprocessing.get_context("spawn").Process(target=_busy_loop, daemon=True)
    busy.start()
    try:
        yield
    finally:
        busy.terminate()
        busy.join(5)


def run_peer(
    name: str, settings: Settings, count: int, concurrency: int, host_collector: bool = False
) -> dict[str, Any]:
    """One run of peer ``name`` in a fresh process; its figures."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(
        target=_peer_main,
        args=(name, settings.model_dump(mode="json"), count, concurrency, theirs, host_collector),
    )
    process.start()
    theirs.close()  # the child's end: a child that dies then ends the pipe (EOFError)
    try:
        return ours.recv()  # type: ignore[no-any-return]
    except EOFError:
        process.join(60)
        raise RuntimeError(
            f"the {name} peer exited (code {process.exitcode}) without its figures"
        ) from None
    finally:
        process.join(60)


def spread(values: Sequence[float], scale: float = 1.0, digits: int = 2) -> str:
    ordered = sorted(v * scale for v in values)
    return "/".join(
        f"{v:.{digits}f}" for v in (ordered[0], statistics.median(ordered), ordered[-1])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=None, help="our pool size")
    parser.add_argument("--busy", action="store_true", help="one more CPU-bound process")
    parser.add_argument("--only", nargs="+", choices=sorted(PEERS), help="run only these peers")
    parser.add_argument(
        "--host-collector", action="store_true", help="ours with CPython's collector defaults"
    )
    args = parser.parse_args()

    names = list(args.only or ("ours", "plain", "haystack"))
    if "haystack" in names:
        missing = haystack_missing()
        if missing:
            print(f"{missing}: the haystack peer is skipped")
            names.remove("haystack")

    with (
        served_world(args.questions + 1, args.pages, args.latency_ms) as (base, _),
        ExitStack() as beside,
    ):
        if args.processes is not None:
            base = base.model_copy(
                update={"analysis": base.analysis.model_copy(update={"processes": args.processes})}
            )
        print(
            f"{args.questions} questions x {args.pages} pages, concurrency {args.concurrency}, "
            f"{args.latency_ms} ms latency, {args.rounds} interleaved rounds"
            + (", one CPU-bound process beside" if args.busy else "")
        )
        print(f"load average before: {load_average()}")
        beside.enter_context(busy_core(args.busy))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else names[::-1]
            for name in order:
                result = run_peer(name, base, args.questions, args.concurrency, args.host_collector)
                runs[name].append(result)
                print(
                    f"  round {round_ + 1} {name:<8} {result['qps']:6.2f} q/s  "
                    f"p95 {result['p95']:.2f} s  CPU/q {result['cpu_q'] * 1000:4.0f} ms "
                    f"(own {result['own_q'] * 1000:3.0f})  "
                    f"RSS {result['rss']:5.0f} MB  {result['outcomes']}",
                    flush=True,
                )
        print(f"load average after: {load_average()}")
        print()
        print(
            f"{'peer':<10}{'q/s':>18}{'p50 s':>18}{'p95 s':>18}{'CPU/q ms':>18}"
            f"{'own CPU/q ms':>18}{'RSS MB':>18}"
        )
        print(f"{'':<10}" + f"{'min/median/max':>18}" * 6)
        for name in names:
            rs = runs[name]
            print(
                f"{name:<10}{spread([r['qps'] for r in rs]):>18}"
                f"{spread([r['p50'] for r in rs]):>18}{spread([r['p95'] for r in rs]):>18}"
                f"{spread([r['cpu_q'] for r in rs], 1000, 0):>18}"
                f"{spread([r['own_q'] for r in rs], 1000, 0):>18}"
                f"{spread([r['rss'] for r in rs], 1, 0):>18}"
            )
        if "ours" in runs and "plain" in runs:

            def median(name: str, key: str) -> float:
                return statistics.median(r[key] for r in runs[name])

            print()
            print(
                "ours/plain (medians): "
                f"q/s {median('ours', 'qps') / median('plain', 'qps'):.2f}x, "
                f"p95 {median('ours', 'p95') / median('plain', 'p95'):.2f}x, "
                f"CPU per question {median('ours', 'cpu_q') / median('plain', 'cpu_q'):.2f}x, "
                f"RSS {median('ours', 'rss') / median('plain', 'rss'):.2f}x"
            )


if __name__ == "__main__":
    main()
