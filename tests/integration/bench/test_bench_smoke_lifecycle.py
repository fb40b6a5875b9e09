"""The benchmarks of the job's lifecycle (upgrade, watchdog, cluster) still run.

The cluster's runs in its smoke mode (see test_bench_smoke.py). The upgrade's and the watchdog's smoke runs take
three minutes each on two cores, for code paths the lifecycle tests already drive end to end (test_front_ends_agree,
test_airflow_upgrade, test_airflow_watchdog): the suite only imports them, which finds what
breaks them most often (a function they call renamed or moved). ``bench/run --smoke upgrade watchdog`` runs them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.bench.test_bench_smoke import LIFECYCLE_BENCHES, ROOT, smoke_run

#: The lifecycle benchmarks whose smoke run the suite makes.
RUN = ("cluster",)
#: Those it only imports.
IMPORTED = ("upgrade", "watchdog")


@pytest.mark.parametrize("name", RUN)
def test_the_lifecycle_benchmark_runs(name: str, kafka_bootstrap: str) -> None:
    smoke_run(name, kafka_bootstrap)


@pytest.mark.parametrize("name", IMPORTED)
def test_the_lifecycle_benchmark_imports(name: str) -> None:
    """The script loads as ``bench/run`` loads it (``bench/`` on the path), every name it imports found."""
    probe = f"import sys; sys.path.insert(0, 'bench'); import bench_{name}; assert callable(bench_{name}.main)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"bench {name} no longer loads:\n{done.stderr[-4000:]}"


def test_every_lifecycle_benchmark_is_run_or_imported() -> None:
    assert sorted(RUN + IMPORTED) == sorted(LIFECYCLE_BENCHES)
