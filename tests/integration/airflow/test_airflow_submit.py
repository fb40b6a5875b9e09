"""StreamSubmitOperator with real Airflow, real spark-submit, a real broker: one detached driver, no secrets shown."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.lifecycle.test_exactly_once import PARTITIONS, events
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-" + "Zq8Lw2"


def drivers_of(home: Path) -> list[int]:
    """Pids of spark-submit / driver processes whose arguments name this job home."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"example_pipeline" in arg for arg in args) and str(home).encode() in args:
            found.append(int(entry.name))
    return found


def all_process_arguments() -> bytes:
    chunks = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                chunks.append((entry / "cmdline").read_bytes())
            except OSError:
                pass
    return b"\n".join(chunks)


def submit_dag(dag_id: str, home: Path, topic: str, group: str, output: Path, version: str) -> str:
    return f"""
from airflow.sdk import DAG
from airflow_kafka_stream.operators.submit import StreamSubmitOperator

with DAG({dag_id!r}, schedule=None, catchup=False) as dag:
    StreamSubmitOperator(task_id="submit", job_home={str(home)!r}, app_version={version!r}, topics=[{topic!r}],
                         group={group!r}, output_path={str(output)!r}, deferrable=True, poll_seconds=1,
                         timeout_seconds=300, min_batches=1)
"""


def test_submit_starts_one_detached_driver_and_keeps_secrets_out(tmp_path, kafka_bootstrap, airflow_db, monkeypatch,
                                                                capfd):
    topic = create_topic(kafka_bootstrap, unique("af-submit"), PARTITIONS)
    group = unique("af-submit-group")
    produce(kafka_bootstrap, topic, events(0, 30))
    home, output = tmp_path / "home", tmp_path / "out"
    set_connection(monkeypatch, "kafka_default", kafka_connection(
        kafka_bootstrap, **{"sasl.username": "svc-stream", "sasl.password": SECRET}))
    set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    try:
        first = run_dag("aks_submit", submit_dag("aks_submit", home, topic, group, output, "1"))
        assert first.tasks == {"submit": "success"}, _driver_log(home)
        job = first.xcom("submit")
        assert job["state"] == "RUNNING" and job["generation"] == 1 and job["application_id"]
        assert job["start_offsets"] == {topic: {str(p): 0 for p in range(PARTITIONS)}}
        assert first.xcom("submit", "submit")["action"] == "launched"
        drivers = drivers_of(home)
        assert drivers, "the driver must outlive the task"
        assert SECRET.encode() not in all_process_arguments(), "the secret is in a process's arguments"

        again = run_dag("aks_submit", submit_dag("aks_submit", home, topic, group, output, "1"))
        assert again.tasks == {"submit": "success"}
        assert again.xcom("submit", "submit")["action"] == "already-running"
        assert drivers_of(home) == drivers, "a re-run submit started another driver"

        other = run_dag("aks_submit_v2", submit_dag("aks_submit_v2", home, topic, group, output, "2"))
        assert other.tasks == {"submit": "failed"}
        assert drivers_of(home) == drivers
        assert "version 1 runs" in JobHome(str(home)).history()[-1]["error"]

        for name in ("job.json", "status.json", "history.jsonl"):
            assert SECRET not in (home / name).read_text(), name
        for outcome in (first, again, other):
            assert SECRET not in json.dumps(list(outcome.xcoms.values()), default=str)
            assert outcome.rendered.get("submit"), "Airflow stored no rendered template fields to check"
            assert SECRET not in json.dumps(outcome.rendered, default=str), "the secret is in a rendered template"
        # dag.test() runs the tasks in this process: their logs are this process's output.
        printed = capfd.readouterr()
        assert "is RUNNING" in printed.out + printed.err, "the task logs were not captured, so not checked"
        assert SECRET not in printed.out + printed.err, "the secret is in a task log"
    finally:
        _stop(home)


def _driver_log(home: Path) -> str:
    logs = sorted((home / "logs").glob("driver-*.log")) if (home / "logs").exists() else []
    return logs[-1].read_text(errors="replace")[-3000:] if logs else "(no driver log)"


def kill_drivers(home: Path) -> None:
    """``kill -9`` every process group of the job's drivers (Python driver and JVM, no shutdown hooks)."""
    for pid in drivers_of(home):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _stop(home: Path) -> None:
    (home / "control").mkdir(parents=True, exist_ok=True)
    (home / "control" / "stop").write_text(json.dumps({"requested_at": "test", "by": "test"}))
    deadline = time.monotonic() + 90
    while drivers_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    kill_drivers(home)
