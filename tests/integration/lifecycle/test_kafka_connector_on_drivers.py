"""Spark's own Kafka connector on every driver a launch starts: a job whose batches write with Spark's Kafka sink
(``write.format("kafka")``) runs when Airflow submits it, and again when the watchdog replays its recorded
submission from a terminal after a ``kill -9``.

Nothing in the test names the connector: the default (``kafka_connector`` auto) puts the jars that
jvm/spark-kafka/pom.xml pins into ``spark.jars`` at every launch. Without them the driver's first batch fails
(Spark answers ``KAFKA_DATA_SOURCE_NOT_ENABLED``): the records in the output topic are the proof.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.cli_helpers import run
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "apps" / "kafka_sink_version.py"


def submit_dag(home: Path, topic: str, group: str, output_topic: str) -> str:
    return f"""
from airflow.sdk import DAG
from airflow_kafka_stream.operators.submit import StreamSubmitOperator

with DAG("connector_submit", schedule=None, catchup=False) as dag:
    StreamSubmitOperator(task_id="submit", job_home={str(home)!r}, app_version="1", application={str(APP)!r},
                         topics=[{topic!r}], group={group!r}, output_path={output_topic!r}, poll_seconds=1,
                         timeout_seconds=300, min_batches=1)
"""


def output_ids(bootstrap: str, topic: str, wanted: set[str], timeout: float = 180.0) -> set[str]:
    """The ids in the output topic, read until all of ``wanted`` arrived (or the time is up)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("connector-check"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    found: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while not wanted <= found and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                found.add(json.loads(message.value())["id"])
    finally:
        consumer.close()
    return found


def feed(bootstrap: str, topic: str, first: int, count: int) -> set[str]:
    produce(bootstrap, topic, [(f"k{i % 4}", json.dumps({"id": f"e{i}"})) for i in range(first, first + count)])
    return {f"e{i}" for i in range(first, first + count)}


def test_airflow_and_a_watchdog_replay_launch_drivers_that_write_with_sparks_kafka_sink(tmp_path, kafka_bootstrap,
                                                                                         airflow_db, monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("connector-in"), 2)
    output_topic = create_topic(kafka_bootstrap, unique("connector-out"), 1)
    home = tmp_path / "home"
    set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
    set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    sent = feed(kafka_bootstrap, topic, 0, 20)

    submitted = run_dag("connector_submit", submit_dag(home, topic, unique("connector-group"), output_topic))
    assert submitted.tasks == {"submit": "success"}, submitted.tasks
    assert output_ids(kafka_bootstrap, output_topic, sent) >= sent, "the driver Airflow launched wrote every record"
    recorded = JobHome(str(home)).submission("1")
    assert recorded.get("kafka_connector") is None and "spark.jars" not in recorded["spark_conf"], \
        "the choice is recorded (auto), never this machine's jar paths"

    first = JobHome(str(home)).status()
    os.killpg(os.getpgid(first["pid"]), signal.SIGKILL)
    deadline = time.monotonic() + 60
    while _alive(first["jvm_pid"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    sent |= feed(kafka_bootstrap, topic, 20, 20)
    config = tmp_path / "client.properties"
    config.write_text(f"bootstrap.servers={kafka_bootstrap}\n")
    code, out, err = run("watchdog", "--job-home", str(home), "--command-config", str(config), "--json")
    assert code == 0 and json.loads(out)["action"] == "restart", out + err
    assert output_ids(kafka_bootstrap, output_topic, sent) >= sent, "the replayed driver wrote the rest"
    code, out, err = run("stop", "--job-home", str(home), "--json")
    assert code == 0 and json.loads(out)["state"] == "STOPPED", out + err


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
