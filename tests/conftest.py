"""Shared fixtures: a real Kafka-protocol broker and a real local Spark session.

Set KAFKA_BOOTSTRAP_SERVERS to run the integration tests against an existing
cluster instead of the embedded broker; topics get unique names either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Spark's Python workers must run this environment's interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap servers of a real broker: KAFKA_BOOTSTRAP_SERVERS, or a local tansu."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        yield given
        return
    from airflow_kafka_stream.devstack.broker import start_local_broker

    broker = start_local_broker()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session for the whole run (starting one costs seconds)."""
    from airflow_kafka_stream.spark.session import local_session

    session = local_session("tests", warehouse=str(tmp_path_factory.mktemp("spark-warehouse")))
    try:
        yield session
    finally:
        session.stop()
