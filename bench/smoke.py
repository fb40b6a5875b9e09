"""Smoke mode (``BENCH_SMOKE=1``, ``bench/run --smoke``): every benchmark on its smallest sizes, one round, no
warm-up, so that the test suite can run each one and a benchmark that no longer runs fails there
(``tests/integration/bench/test_bench_smoke.py``). Its figures mean nothing and nobody reads them.

Imported by the benchmark scripts, which run with ``bench/`` on ``sys.path`` (as scripts do).
"""

from __future__ import annotations

import os

SMOKE = os.environ.get("BENCH_SMOKE") == "1"


def sized(variable: str | None, full: float, smoke: float) -> float:
    """The benchmark's setting: ``variable`` from the environment when set, else the smoke or the full value."""
    given = os.environ.get(variable) if variable else None
    if given:
        return float(given)
    return smoke if SMOKE else full


def count(variable: str | None, full: int, smoke: int) -> int:
    """``sized`` for a count."""
    return int(sized(variable, full, smoke))
