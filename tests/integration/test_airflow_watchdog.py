"""The watchdog with real Airflow, real drivers and a real broker: it restarts a killed driver (nothing lost
or duplicated), leaves a healthy or a stopped job alone, and gives up on a version that fails every start."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.test_airflow_submit import drivers_of
from tests.integration.test_airflow_upgrade import APPS, Feeder, example_dag, output_ids
from tests.kafka_utils import create_topic, produce, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2


def watchdog_dag(home: Path) -> str:
    return f"""
from airflow.sdk import DAG
from airflow_kafka_stream.operators.watchdog import StreamWatchdogOperator

with DAG("aks_watchdog", schedule=None, catchup=False) as dag:
    StreamWatchdogOperator(task_id="watchdog", job_home={str(home)!r}, max_heartbeat_age=5, backoff_seconds=0,
                           max_restarts=1, window_seconds=3600, stuck_after_seconds=600)
"""


def wait_for(predicate, what: str, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    pytest.fail(f"timed out waiting for {what}")


def kill_drivers(home: Path) -> None:
    for pid in drivers_of(home):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_watchdog_restarts_a_killed_driver_leaves_a_stopped_job_and_gives_up_on_a_crash_loop(
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

        killed_pid = status()["pid"]
        kill_drivers(home)
        wait_for(lambda: time.time() - status()["heartbeat_epoch"] > 21, "the heartbeat to go stale")
        restarted = run_dag("aks_watchdog", watchdog_dag(home))
        assert restarted.tasks == {"watchdog": "success"}
        assert restarted.xcom("watchdog")["action"] == "restart", restarted.xcom("watchdog")
        wait_for(lambda: status().get("state") == "RUNNING" and status().get("pid") != killed_pid,
                 "the restarted driver")
        assert [r["operation"] for r in JobHome(str(home)).history()].count("watchdog-restart") == 1
    finally:
        sent = feeder.stop()
    ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
    wanted = {topic: {str(p): end for p, end in ends.items()}}
    wait_for(lambda: status().get("last_offsets") == wanted, "the restarted job to catch up")
    assert run_dag("stream_stop", path=example_dag("stream_stop"), conf={"job_home": str(home)}).tasks == {
        "stop": "success"}
    ids = output_ids(output)
    assert len(ids) == len(set(ids)) and set(ids) == {f"e{i}" for i in range(sent)}

    left_alone = run_dag("aks_watchdog", watchdog_dag(home))
    assert left_alone.xcom("watchdog")["action"] == "nothing" and "on purpose" in left_alone.xcom("watchdog")["reason"]
    assert drivers_of(home) == [], "a stopped job must stay stopped"

    # A version that fails every batch: restarted once (the limit), then the watchdog gives up, loudly.
    produce(kafka_bootstrap, topic, [("k", json.dumps({"id": "poison"}))])
    poison = run_dag("aks_submit_poison", f"""
from airflow.sdk import DAG
from airflow_kafka_stream.operators.submit import StreamSubmitOperator

with DAG("aks_submit_poison", schedule=None, catchup=False) as dag:
    StreamSubmitOperator(task_id="submit", job_home={str(home)!r}, app_version="9", topics=[{topic!r}],
                         group={job["group"]!r}, output_path={str(output)!r}, application={str(APPS / "poison_version.py")!r},
                         deferrable=True, poll_seconds=1, timeout_seconds=300)
""")
    assert poison.tasks == {"submit": "failed"}, "the poison version fails its first batch"
    wait_for(lambda: status().get("state") == "FAILED" and not drivers_of(home), "the poison version to fail")
    again = run_dag("aks_watchdog", watchdog_dag(home))
    assert again.xcom("watchdog")["action"] == "restart", again.xcom("watchdog")
    wait_for(lambda: status().get("state") != "FAILED", "the restarted poison version to report")
    wait_for(lambda: status().get("state") == "FAILED" and not drivers_of(home), "the second failure")
    given_up = run_dag("aks_watchdog", watchdog_dag(home))
    assert given_up.tasks == {"watchdog": "failed"}
    record = JobHome(str(home)).history()[-1]
    assert record["operation"] == "watchdog-give-up" and "crash loop" in record["error"]
    assert "poison record" in record["error"], "the give-up names the driver's last error"
    assert drivers_of(home) == []
