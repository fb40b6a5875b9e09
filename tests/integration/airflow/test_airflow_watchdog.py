"""The watchdog with real Airflow (``dag.test()`` of the example DAG), real drivers and a real broker: it restarts
a killed driver at once when the driver is provably gone from this host (nothing lost or duplicated), and leaves
a healthy or a stopped job alone.

Its other rules are tested where they cost less or matter more: a driver judged by its heartbeat age (one
frozen past the limit) with real drivers in test_hot_standby.py, which applies the same rules; the give-up on a
crash loop through the full stack (test_airflow_stack.py) and, naming the driver's last error, in
tests/unit/ops/test_restart_budget.py."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.airflow.test_airflow_submit import drivers_of, kill_drivers
from tests.integration.airflow.test_airflow_upgrade import Feeder, example_dag, output_ids
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2


def watchdog_dag(home: Path, max_restarts: int = 1) -> str:
    return f"""
from airflow.sdk import DAG
from airflow_kafka_stream.operators.watchdog import StreamWatchdogOperator

with DAG("aks_watchdog", schedule=None, catchup=False) as dag:
    StreamWatchdogOperator(task_id="watchdog", job_home={str(home)!r}, max_heartbeat_age=5, backoff_seconds=0,
                           max_restarts={max_restarts}, window_seconds=3600, stuck_after_seconds=600)
"""


def restarts(home: Path) -> int:
    return [r["operation"] for r in JobHome(str(home)).history()].count("watchdog-restart")


def wait_for(predicate, what: str, timeout: float = 180.0, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    pytest.fail(f"timed out waiting for {what}")


def test_watchdog_restarts_a_killed_driver_and_leaves_a_stopped_job_alone(
        tmp_path, kafka_bootstrap, airflow_db, monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("af-watchdog"), PARTITIONS)
    home, output = tmp_path / "home", tmp_path / "out"
    set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
    set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    job = {"job_home": str(home), "topics": [topic], "group": unique("af-watchdog-group"), "output_path": str(output)}
    status = lambda: JobHome(str(home)).status() or {}  # noqa: E731
    feeder = Feeder(kafka_bootstrap, topic)
    feeder.start()
    try:
        assert run_dag("stream_submit", path=example_dag("stream_submit"),
                       conf={**job, "app_version": "1"}).tasks == {"submit": "success"}
        healthy = run_dag("aks_watchdog", watchdog_dag(home))
        assert healthy.xcom("watchdog")["action"] == "nothing"

        # 1. kill -9 on this host, then the example watchdog DAG (heartbeat limit 30 s) within 5 s: restarted by
        # that run, once, although the dead driver's heartbeat is still fresh.
        killed_pid = status()["pid"]
        kill_drivers(home)
        killed_at = time.time()
        wait_for(lambda: not drivers_of(home), "the killed driver's processes to be gone")
        assert time.time() - killed_at < 5
        restarted = run_dag("stream_watchdog", path=example_dag("stream_watchdog"), conf={"job_home": str(home)})
        decided = restarted.xcom("watchdog")
        assert restarted.tasks == {"watchdog": "success"}
        assert decided["action"] == "restart" and "no longer exist" in decided["reason"], decided
        assert restarts(home) == 1
        restart = next(r for r in JobHome(str(home)).history() if r["operation"] == "watchdog-restart")
        decided_after = datetime.fromisoformat(restart["started_at"]).timestamp() - killed_at
        assert decided_after < 20, f"restarted {decided_after:.0f}s after the kill, before any 30 s heartbeat limit"
        wait_for(lambda: status().get("state") == "RUNNING" and status().get("pid") != killed_pid,
                 "the restarted driver")
        again = run_dag("stream_watchdog", path=example_dag("stream_watchdog"), conf={"job_home": str(home)})
        assert again.xcom("watchdog")["action"] == "nothing" and restarts(home) == 1, "restarted exactly once"

    finally:
        sent = feeder.stop()
    ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
    wanted = {topic: {str(p): end for p, end in ends.items()}}
    wait_for(lambda: status().get("last_offsets") == wanted, "the restarted job to catch up")
    assert run_dag("stream_stop", path=example_dag("stream_stop"), conf={"job_home": str(home)}).tasks == {
        "stop": "success"}
    ids = output_ids(output)
    assert len(ids) == len(set(ids)) and set(ids) == {f"e{i}" for i in range(sent)}

    # The stopped driver's process exits seconds after it wrote STOPPED (Spark's own shutdown), longer on a loaded
    # machine: a driver found after that is one the watchdog started.
    wait_for(lambda: not drivers_of(home), "the stopped driver's process to exit")
    left_alone = run_dag("aks_watchdog", watchdog_dag(home))
    assert left_alone.xcom("watchdog")["action"] == "nothing" and "on purpose" in left_alone.xcom("watchdog")["reason"]
    assert drivers_of(home) == [], "a stopped job must stay stopped"
