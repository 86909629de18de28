"""What signing shared entries costs: µs to seal (write) and to open (read) one cached page,
for page bodies of several sizes (the metadata a real entry carries, about 600 bytes, in
front). Pure CPU (HMAC-SHA256 over the bytes), no Redis: the round trip is the same with or
without a tag, plus the tag's 32 bytes.

    python bench/cache_signing.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service.storage._signing import EntrySigner, SigningKey

SIZES = (10_000, 100_000, 1_000_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    signer = EntrySigner(SigningKey.from_secret("bench secret"))
    meta = os.urandom(600)
    key = "external-query:http:e:" + "ab" * 32
    for size in SIZES:
        body = os.urandom(size)
        seal, check = [], []
        for _ in range(args.runs):
            began = time.perf_counter()
            tag = signer.seal(key, meta, body)
            sealed = time.perf_counter()
            assert signer.opens(key, tag, meta, body)
            check.append(time.perf_counter() - sealed)
            seal.append(sealed - began)
        print(
            f"body {size:>9,} B: seal {statistics.median(seal) * 1e6:8.1f} µs, "
            f"open {statistics.median(check) * 1e6:8.1f} µs (median of {args.runs})"
        )


if __name__ == "__main__":
    main()
