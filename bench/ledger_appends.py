"""Ledger appends per second: SQLite (embedded) against PostgreSQL (shared), one writer and
four concurrent writer processes.

An append is one answer: ``persist_chain`` of a plan, its receipt, its admission and the
chain record (four records, one transaction), each answer new. Chains are built before the
clock starts, so the figures are storage only: durable commits (SQLite ``synchronous=FULL``;
PostgreSQL as the server is configured — ``synchronous_commit`` is printed). Each run writes
a fresh SQLite file in a temporary folder or a fresh PostgreSQL schema, dropped afterwards.
Printed: answers/s, records/s, and the p50/p95 latency of one append.

    python bench/ledger_appends.py [--answers 300] [--writers 4]
        [--postgres postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

# The chains are the tests' own (built with the admission contract, no service involved).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service.storage import LedgerTarget, migrate_ledger, open_ledger
from tests.support.ledger_records import make_chain

RECORDS_PER_ANSWER = 4


def append(target: LedgerTarget, writer: int, answers: int, start: object) -> list[float]:
    """One writer: build its chains, wait for the shared start, append them all; the
    latency of each append in seconds."""
    chains = [make_chain(f"Bench writer {writer} answer {n}") for n in range(answers)]
    latencies: list[float] = []
    with open_ledger(target) as ledger:
        start.wait()  # type: ignore[attr-defined]
        for chain in chains:
            began = time.perf_counter()
            ledger.persist_chain(chain)
            latencies.append(time.perf_counter() - began)
    return latencies


def _worker(target: LedgerTarget, writer: int, answers: int, start: object, out: object) -> None:
    out.put(append(target, writer, answers, start))  # type: ignore[attr-defined]


def run(target: LedgerTarget, writers: int, answers: int) -> tuple[float, list[float]]:
    """Wall seconds from the shared start to the last append, and every append's latency."""
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(writers + 1)
    out = spawn.Queue()
    processes = [
        spawn.Process(target=_worker, args=(target, writer, answers, start, out))
        for writer in range(writers)
    ]
    for process in processes:
        process.start()
    start.wait()
    began = time.perf_counter()
    latencies = [value for _ in processes for value in out.get(timeout=600)]
    wall = time.perf_counter() - began
    for process in processes:
        process.join()
    return wall, latencies


def report(name: str, writers: int, wall: float, latencies: list[float]) -> None:
    answers = len(latencies)
    cuts = statistics.quantiles(latencies, n=20)
    print(
        f"{name:<10} writers={writers}  answers={answers:>5}  {wall:6.2f} s  "
        f"{answers / wall:7.1f} answers/s  {answers * RECORDS_PER_ANSWER / wall:8.1f} records/s  "
        f"p50 {statistics.median(latencies) * 1000:6.2f} ms  p95 {cuts[18] * 1000:6.2f} ms"
    )


def postgres_schema(base: str) -> tuple[str, str]:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    joiner = "&" if "?" in base else "?"
    return schema, f"{base}{joiner}options=-csearch_path%3D{schema}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=300, help="answers per writer")
    parser.add_argument("--writers", type=int, default=4, help="concurrent writer processes")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="database to make a throwaway schema in",
    )
    args = parser.parse_args()
    with psycopg.connect(args.postgres) as conn:
        setting = conn.execute("SHOW synchronous_commit").fetchone()
    print(f"PostgreSQL synchronous_commit = {setting[0] if setting else '?'}; SQLite FULL")
    with tempfile.TemporaryDirectory() as folder:
        for writers in (1, args.writers):
            path = Path(folder) / f"ledger-{writers}.sqlite3"
            open_ledger(path).close()
            report("sqlite", writers, *run(path, writers, args.answers))
    for writers in (1, args.writers):
        schema, url = postgres_schema(args.postgres)
        try:
            migrate_ledger(url)
            report("postgresql", writers, *run(url, writers, args.answers))
            with open_ledger(url) as ledger:
                assert ledger.verify().ok
        finally:
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
