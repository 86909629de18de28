"""What the CLDR currency table costs: the first lookup, the ones after it, and the target check.

``text/_currencies.py`` reads Babel's locale data on first use and keeps the table, so the
first currency question of a process pays for it and later ones do not. Each run is a fresh
interpreter (a warm table would hide the cost); it prints CPU and wall time for importing
the module, building the table (the first ``currency_aliases``), a later lookup, and one
exchange-rate target check over three texts.

    python bench/currency_table.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = r"""
import json, time

def clocks():
    return time.process_time(), time.perf_counter()

def since(start):
    cpu, wall = clocks()
    return cpu - start[0], wall - start[1]

from external_query_service.text._targets import normalize_for_match
normalize_for_match("预热")  # OpenCC's dictionaries are the target matcher's cost, not ours
start = clocks()
from external_query_service.text import currencies
figures = {"import": since(start)}
start = clocks()
currencies.currency_aliases("USD")
figures["first lookup (builds the table)"] = since(start)
start = clocks()
currencies.currency_code("人民幣")
figures["later lookup"] = since(start)
from external_query_service.text._targets import MATCH_THRESHOLD, best_match
texts = ("港币对人民币汇率", "网友提问：今天汇率是多少？港币对人民币汇率是0.8848", "")
start = clocks()
for code in ("USD", "CNY"):
    any(best_match(name, texts) >= MATCH_THRESHOLD for name in currencies.currency_aliases(code))
figures["one pair check, three texts"] = since(start)
print(json.dumps(figures))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    samples: dict[str, list[tuple[float, float]]] = {}
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD], check=True, capture_output=True, text=True
        ).stdout
        for name, (cpu, wall) in json.loads(out).items():
            samples.setdefault(name, []).append((cpu, wall))
    print(f"median of {runs} fresh interpreters (ms)")
    print(f"{'step':<34}{'cpu':>9}{'wall':>9}")
    for name, values in samples.items():
        cpu = statistics.median(v[0] for v in values) * 1000
        wall = statistics.median(v[1] for v in values) * 1000
        print(f"{name:<34}{cpu:>9.2f}{wall:>9.2f}")


if __name__ == "__main__":
    main()
