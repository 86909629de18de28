"""``ledger verify`` on a large SQLite ledger: how long recomputing every digest, content
id and chain link, and checking the chain against its anchored head, takes.

The ledger is filled with real answer chains (plan, receipt, admission, chain record: four
records each, built with the admission contract) until it holds ``--records`` records.
Filling uses ``synchronous = OFF`` on the bench's own connection (only to fill faster: the
figure measured is ``verify``, which only reads). Printed: the fill time, then the verify
time of each run and their median, and the head the chain was checked against.

    python bench/ledger_verify.py [--records 100000] [--runs 3] [--keep FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service.storage import SQLiteLedger, open_ledger
from tests.support.ledger_records import make_chain

RECORDS_PER_ANSWER = 4


def fill(path: Path, records: int) -> float:
    began = time.perf_counter()
    with SQLiteLedger(path) as ledger:
        ledger._db.execute("PRAGMA synchronous = OFF")  # filling only; verify just reads
        for n in range(-(-records // RECORDS_PER_ANSWER)):
            ledger.persist_chain(make_chain(f"Verify bench answer {n}"))
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="fill (or reuse) this file instead of a temp one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = args.keep or Path(folder) / "ledger.sqlite3"
        if not path.exists():
            print(f"filled {args.records} records in {fill(path, args.records):.1f} s")
        times = []
        for _ in range(args.runs):
            with open_ledger(path, create=False) as ledger:
                began = time.perf_counter()
                check = ledger.verify()
                times.append(time.perf_counter() - began)
            assert check.ok, check
        print(
            f"verify {check.records} records: "
            + ", ".join(f"{t:.2f} s" for t in times)
            + f"; median {statistics.median(times):.2f} s"
            + f" ({check.records / statistics.median(times):,.0f} records/s); head {check.head_seq}"
        )


if __name__ == "__main__":
    main()
