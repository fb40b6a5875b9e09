"""The benchmarks of the job's lifecycle (upgrade, watchdog, cluster) still run, in their smoke mode: see
test_bench_smoke.py, whose other benchmarks they are kept apart from so that two test workers share them."""

from __future__ import annotations

import pytest

from tests.integration.test_bench_smoke import LIFECYCLE_BENCHES, smoke_run


@pytest.mark.parametrize("name", LIFECYCLE_BENCHES)
def test_the_lifecycle_benchmark_runs(name: str, kafka_bootstrap: str) -> None:
    smoke_run(name, kafka_bootstrap)
