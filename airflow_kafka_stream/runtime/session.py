"""A local SparkSession with the settings this project's tests and demo rely on."""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession

# jvm_jars_folder, spark_kafka_jars and SPARK_KAFKA_JARS_ENV lived here: imported from here, they keep working.
from airflow_kafka_stream.cluster.jvm_jars import SPARK_KAFKA_JARS_ENV, jvm_jars_folder, spark_kafka_jars
from airflow_kafka_stream.core.kafka_connector import with_jars
from airflow_kafka_stream.core.spark_settings import with_default_settings

__all__ = ["SPARK_KAFKA_JARS_ENV", "executor_count", "is_local", "jvm_jars_folder", "local_session",
           "spark_kafka_jars"]

# Lazy imports: source.source (PySpark's Python data source API) waits for a local session to register it: every
# driver imports this module through the runtime.


def local_session(app_name: str, warehouse: str | None = None, cores: str = "*", extra: dict | None = None):
    """Create (or get) a local-mode SparkSession that runs Python workers on this interpreter.

    Registers the project's Kafka data source so ``format("kafka_stream")`` works, and puts Spark's own
    connector on the class path when it is installed (:func:`spark_kafka_jars`) so ``format("kafka")`` does too.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.streaming.stopTimeout", "60s")
    )
    if warehouse:
        builder = builder.config("spark.sql.warehouse.dir", warehouse)
    settings = with_jars(extra or {}, spark_kafka_jars())
    for key, value in with_default_settings(settings).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    from airflow_kafka_stream.source.source import register

    register(session)
    return session


def executor_count(spark) -> int:
    """Executors registered with this application (the driver's own entry not counted)."""
    return max(len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1, 0)


#: How long a standby on a cluster waits for its first executor before it rehearses without one.
EXECUTOR_GRACE_SECONDS = 30.0


def is_local(spark) -> bool:
    """Whether the session runs in local mode (its executors are this driver's threads)."""
    return str(spark.conf.get("spark.master", "")).startswith("local")


class ExecutorGrace:
    """From now, how long a standby on a cluster waits for an executor: the running version may hold every core."""

    def __init__(self, spark, seconds: float = EXECUTOR_GRACE_SECONDS) -> None:
        self._spark, self.seconds = spark, seconds
        self._cluster = not is_local(spark)
        self._due = time.monotonic() + seconds

    def ran_out(self) -> bool:
        """On a cluster, the grace is over and the application still has no executor."""
        return self._cluster and time.monotonic() > self._due and executor_count(self._spark) == 0
