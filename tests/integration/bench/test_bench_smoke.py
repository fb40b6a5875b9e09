"""Every benchmark still runs: each one in its smoke mode (``bench/run --smoke``: the smallest sizes, one round,
no warm-up; see bench/smoke.py) against the test broker. The figures are not checked, only that the benchmark
exits 0 having printed its ``name: value`` lines: a benchmark broken by a change to the code it drives fails
here instead of going unmeasured until someone runs ``bench/run``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.runner import BENCHES

ROOT = Path(__file__).resolve().parents[3]
FIGURE = re.compile(r"^[a-z0-9_]+: -?\d+(\.\d+)?$")


def test_every_benchmark_script_is_run_by_the_runner() -> None:
    scripts = {path.stem.removeprefix("bench_") for path in (ROOT / "bench").glob("bench_*.py")}
    assert scripts == set(BENCHES), "bench/runner.py's BENCHES must name every bench/bench_*.py"


#: The benchmarks that start drivers, standbys, a cluster or the Airflow stack: minutes each even when small, so
#: they run in a module of their own (test_bench_smoke_lifecycle.py), which the other test worker can take.
LIFECYCLE_BENCHES = ("upgrade", "watchdog", "cluster")


@pytest.mark.parametrize("name", [name for name in BENCHES if name not in LIFECYCLE_BENCHES])
def test_the_benchmark_runs(name: str, kafka_bootstrap: str) -> None:
    smoke_run(name, kafka_bootstrap)


def smoke_run(name: str, kafka_bootstrap: str) -> None:
    """``bench/run --smoke <name>`` exits 0 with only ``name: value`` lines on its standard output."""
    done = subprocess.run([sys.executable, "-m", "bench.runner", "--smoke", name], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap})
    assert done.returncode == 0, f"bench {name} failed:\n{done.stderr[-6000:]}"
    figures = done.stdout.splitlines()
    assert figures, f"bench {name} printed no figure:\n{done.stderr[-3000:]}"
    assert all(FIGURE.match(line) for line in figures), done.stdout
