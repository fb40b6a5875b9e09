"""The suite's own start-cost cuts hold (scripts/setup-spark-python-path): Spark's Python processes import PySpark
compiled from site-packages under the tests, and from Spark's pyspark.zip, as users' jobs do, without the switch.
A cut that silently stops working costs the suite minutes, not a failure: these tests make it one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

pytestmark = pytest.mark.integration

ZIPS = Path(pyspark.__file__).parent / "python" / "lib"


def imported_from(extra_env: dict[str, str]) -> str:
    """Where a Python started as Spark starts its workers (its zips first on the path) finds PySpark."""
    path = os.pathsep.join(str(z) for z in sorted(ZIPS.glob("*.zip")))
    env = {**os.environ, "PYTHONPATH": path, **extra_env}
    done = subprocess.run([sys.executable, "-c", "import pyspark; print(pyspark.__file__)"], env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_spark_python_workers_of_the_suite_import_pyspark_compiled(spark):
    where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()[0]
    assert ".zip" not in where, f"a Spark Python worker compiled PySpark from its zip: {where}"
    assert where == pyspark.__file__


def test_only_the_switch_changes_where_pyspark_comes_from():
    assert "pyspark.zip" in imported_from({"AKS_SPARK_PYTHON_FROM_SITE_PACKAGES": "0"}), "users' jobs untouched"
    assert imported_from({"AKS_SPARK_PYTHON_FROM_SITE_PACKAGES": "1"}) == pyspark.__file__
