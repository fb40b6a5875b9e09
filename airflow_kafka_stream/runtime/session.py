"""A local SparkSession with the settings this project's tests and demo rely on."""

from __future__ import annotations

import os
import sys


def local_session(app_name: str, warehouse: str | None = None, cores: str = "*", extra: dict | None = None):
    """Create (or get) a local-mode SparkSession that runs Python workers on this interpreter.

    Registers the project's Kafka data source so ``format("kafka_stream")`` works.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

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
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    from airflow_kafka_stream.source.source import register

    register(session)
    return session


def executor_count(spark) -> int:
    """Executors registered with this application (the driver's own entry not counted)."""
    return max(len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1, 0)
