"""What the pytest plugin costs a project that does not use it.

pytest loads every ``pytest11`` entry point in the environment, so an unrelated project's
test run starts our plugin too. This runs ``pytest --collect-only`` on a one-test folder in
fresh interpreters, alternating two set-ups: every installed plugin, and every installed
plugin but ours (autoloading off, the others named with ``-p``: what a virtual environment
without this package loads). It reports the CPU time of each child (user + system), which
other work on the machine disturbs far less than wall time, and the wall time beside it.

    python bench/plugin_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

ENTRY_POINT = "external_query_cases"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _once(folder: Path, plugins: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one pytest start-up loading exactly ``plugins``."""
    command = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"]
    for plugin in plugins:
        command += ["-p", plugin]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    cpu, wall = _cpu(), time.perf_counter()
    subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True)
    return _cpu() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_unrelated.py").write_text("def test_one():\n    assert True\n")
        every = [point.value for point in entry_points(group="pytest11")]
        ours = [point.value for point in entry_points(group="pytest11", name=ENTRY_POINT)]
        if not ours:
            raise SystemExit("the package is not installed: no pytest11 entry point of ours")
        others = [plugin for plugin in every if plugin not in ours]
        _once(folder, every)  # warm the file-system cache and bytecode
        runs: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
        for _ in range(args.runs):
            runs["with"].append(_once(folder, every))
            runs["without"].append(_once(folder, others))
    cpu = {key: statistics.median(run[0] for run in value) for key, value in runs.items()}
    wall = {key: statistics.median(run[1] for run in value) for key, value in runs.items()}
    print(f"pytest start-up, median of {args.runs} runs each ({len(others)} other plugins)")
    for key, label in (("with", "with our plugin"), ("without", "without it")):
        print(f"  {label:16} cpu {cpu[key] * 1000:7.1f} ms   wall {wall[key] * 1000:7.1f} ms")
    print(f"  ratio (cpu):        {cpu['with'] / cpu['without']:.3f}  (target <= 1.05)")


if __name__ == "__main__":
    main()
