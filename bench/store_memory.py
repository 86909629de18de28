"""Memory of a long-running service: 10,000 distinct pages through one service, the process's
resident memory sampled every 1,000 pages.

Every question is new and names its own pages, so nothing is shared: the response cache, the
page-analysis memo and the evidence store all fill up to their bounds and then evict. The
bounds are set small here (``--store-mb``, ``--cache-mb``, ``--analysis-mb``) so they are
reached within the run; from then on resident memory should stay flat. The loopback server
runs in the same process (its request log is cleared as it goes).

    python bench/store_memory.py [--pages 10000] [--per-question 10] [--concurrency 4]
                                 [--store-mb 4] [--cache-mb 8] [--analysis-mb 4]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import time
from datetime import UTC, datetime

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.testing import (
    LoopbackServer,
    RecordedRequest,
    Reply,
    article,
    hit,
    json_reply,
    searx_body,
)

SITES = 50
MIB = 1024 * 1024


def rss_mib() -> float:
    """Resident memory now: psutil when installed, else /proc/self/status."""
    try:
        import psutil  # type: ignore[import-not-found]

        return float(psutil.Process().memory_info().rss) / MIB
    except ImportError:
        pass
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def page_body(n: int) -> str:
    return article(
        f"航展报道第{n}篇",
        [
            f"第{n}篇报道：珠海航展上新型无人运输机与舰载预警机首次公开亮相，"
            f"编号{n}的展台吸引了大量观众，参展商来自四十多个国家和地区。" * 3,
            f"报道{n}还介绍了飞行表演的安排、新机型的性能参数与用途。" * 4,
        ],
        published="2026-11-12",
    )


def serve(server: LoopbackServer, per_question: int) -> None:
    def page(request: RecordedRequest) -> Reply:
        return Reply(body=page_body(int(request.query["n"][0])))

    def search(request: RecordedRequest) -> Reply:
        query = request.query.get("q", [""])[0]
        batch = int(query.split("第")[1].split("批")[0])
        hits = []
        for n in range(batch * per_question, (batch + 1) * per_question):
            url = f"http://site-{n % SITES}.test:{server.port}/p?n={n}"
            hits.append(hit(url, f"航展报道第{n}篇", "新机型亮相"))
        return json_reply(searx_body(query, hits))

    server.route("/p", page)
    server.route("/searx/search", search)


def settings_for(server: LoopbackServer, args: argparse.Namespace) -> Settings:
    return Settings.from_mapping(
        {
            "network": {
                "allowed_networks": ["127.0.0.1/32"],
                "resolve": {f"site-{n}.test": "127.0.0.1" for n in range(SITES)},
                "max_pages": args.per_question,
                "timeout_s": 10.0,
                "deadline_s": 60.0,
            },
            "adapters": [
                {"kind": "searxng", "id": "searx", "base_url": server.url("/searx")},
            ],
            "cache": {
                "max_bytes": args.cache_mb * MIB,
                "analysis_max_bytes": args.analysis_mb * MIB,
                "store_max_bytes": args.store_mb * MIB,
                "store_hold_s": 0,
            },
        }
    )


async def run(service: ExternalQueryService, server: LoopbackServer, args: argparse.Namespace):
    batches = args.pages // args.per_question
    sample_every = max(1, 1000 // args.per_question)
    limit = asyncio.Semaphore(args.concurrency)
    started = time.perf_counter()

    async def ask(batch: int) -> None:
        async with limit:
            await service.aanswer(f"航展报道第{batch}批说了什么新机型？")

    print(f"{'pages':>7} {'rss MiB':>9} {'peak MiB':>9} {'store MiB':>10} {'captures':>9} {'s':>6}")
    for start in range(0, batches, sample_every):
        await asyncio.gather(*(ask(b) for b in range(start, min(batches, start + sample_every))))
        server.requests.clear()
        gc.collect()
        pages = min(batches, start + sample_every) * args.per_question
        print(
            f"{pages:>7} {rss_mib():>9.1f} {peak_mib():>9.1f} "
            f"{service.store.size / MIB:>10.2f} {len(service.store):>9} "
            f"{time.perf_counter() - started:>6.0f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--per-question", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--store-mb", type=int, default=4)
    parser.add_argument("--cache-mb", type=int, default=8)
    parser.add_argument("--analysis-mb", type=int, default=4)
    args = parser.parse_args()

    with LoopbackServer() as server:
        serve(server, args.per_question)
        clock = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
        print(f"rss before the service: {rss_mib():.1f} MiB")

        async def main_loop() -> None:
            async with ExternalQueryService(settings_for(server, args), clock=clock) as service:
                await run(service, server, args)

        asyncio.run(main_loop())
    print(
        f"bounds: store {args.store_mb} MiB, response cache {args.cache_mb} MiB, "
        f"analyses {args.analysis_mb} MiB"
    )


if __name__ == "__main__":
    main()
