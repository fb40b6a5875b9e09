"""A job on a Spark standalone cluster (two workers of one core), driven through Airflow from start to end.

The executors run in the workers' own processes with the environment shipped as a packed archive
(``--archives``); the driver is a detached client-mode process tracked through the job home. One job,
fed continuously, is submitted, upgraded (stop with savepoint, next version), stopped with a savepoint,
restored from it and started again, then stopped: record by record nothing is lost or duplicated, and
every executor of every application bound the C reader from the shipped environment (read from the
executors' logs, not assumed).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_kafka_stream.source.native_reader import BOUND_MARKER
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.airflow.test_airflow_submit import _stop, drivers_of
from tests.integration.airflow.test_airflow_upgrade import Feeder, output_ids
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2
# One core (one executor) per application: the cluster has room for the running version and its warm standby, as
# docs/standby.md advises, so the standby rehearses on its own executor and takes over with it warm.
SPARK_CONF = {"spark.executor.memory": "512m", "spark.driver.memory": "768m", "spark.sql.shuffle.partitions": "2",
              "spark.cores.max": "1"}


def cluster_dag(dag_id: str, body: str, **values) -> str:
    header = f"""
from airflow.sdk import DAG
from airflow_kafka_stream.operators.submit import StreamSubmitOperator
from airflow_kafka_stream.operators.stop import StreamStopOperator
from airflow_kafka_stream.operators.savepoints import StreamRestoreOperator
from airflow_kafka_stream.operators.upgrade import stream_upgrade_task_group

JOB = {json.dumps(values)}
CLUSTER = dict(executor_environment=JOB["env"], spark_conf={SPARK_CONF!r})

with DAG({dag_id!r}, schedule=None, catchup=False) as dag:
"""
    return header + "\n".join(f"    {line}" for line in body.strip().splitlines()) + "\n"


# Version 1 reads every batch on the executors (readMode=executors), so their Python workers must bind the C reader
# from the shipped archive; versions 2 run the default (readMode=auto: these small batches are read on the driver).
SUBMIT_V1 = """
StreamSubmitOperator(task_id="submit", job_home=JOB["home"], app_version="1", min_batches=1, poll_seconds=1,
                     timeout_seconds=240, deferrable=True,
                     application_args=["--home", JOB["home"], "--bootstrap", JOB["bootstrap"], "--group", JOB["group"],
                                       "--output", JOB["output"], "--app-version", "1", "--starting-offsets",
                                       "earliest", "--topic", JOB["topic"], "--read-mode", "executors"], **CLUSTER)
"""
# The health window is 45 s, not the 10 s of the local-mode tests: the executors share two cores with the drivers,
# the Airflow worker and the rest of the suite, and a batch that takes longer than the window while records wait
# reads as "consumes nothing".
UPGRADE_V2 = """
stream_upgrade_task_group(job_home=JOB["home"], new_version="2", topics=[JOB["topic"]], group=JOB["group"],
                          output_path=JOB["output"], health_batches=1, health_window_seconds=45,
                          stop_timeout_seconds=120, health_timeout_seconds=360, poll_seconds=1, **CLUSTER)
"""
STOP_RESTORE_START = """
stop = StreamStopOperator(task_id="stop", job_home=JOB["home"], savepoint=True, timeout_seconds=120, poll_seconds=1)
restore = StreamRestoreOperator(task_id="restore", job_home=JOB["home"],
                                savepoint_id="{{ ti.xcom_pull(task_ids='stop')['savepoint']['id'] }}")
start = StreamSubmitOperator(task_id="start", job_home=JOB["home"], app_version="2", from_submission=True,
                             min_batches=1, poll_seconds=1, timeout_seconds=240, deferrable=True)
stop >> restore >> start
"""
FINAL_STOP = """
StreamStopOperator(task_id="stop", job_home=JOB["home"], savepoint=True, timeout_seconds=120, poll_seconds=1)
"""


def test_submit_upgrade_stop_restore_on_a_cluster_exactly_once_with_the_c_reader(
        tmp_path, kafka_bootstrap, airflow_db, monkeypatch, spark_cluster, executor_environment):
    topic = create_topic(kafka_bootstrap, unique("cluster"), PARTITIONS)
    home, output = tmp_path / "home", tmp_path / "out"
    job = {"home": str(home), "output": str(output), "topic": topic, "group": unique("cluster-group"),
           "env": executor_environment, "bootstrap": kafka_bootstrap}
    set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
    set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": spark_cluster.master_url}))
    feeder = Feeder(kafka_bootstrap, topic)
    feeder.start()
    try:
        submitted = run_dag("aks_cluster_submit", cluster_dag("aks_cluster_submit", SUBMIT_V1, **job))
        assert submitted.tasks == {"submit": "success"}, _log(home)
        first_app = submitted.xcom("submit")["application_id"]
        assert first_app.startswith("app-"), "a standalone application id, not local-*"

        upgraded = run_dag("aks_cluster_upgrade", cluster_dag("aks_cluster_upgrade", UPGRADE_V2, **job))
        assert upgraded.tasks["upgrade.outcome"] == "success", (upgraded.tasks, _log(home))
        assert JobHome(str(home)).spec()["version"] == "2"

        cycled = run_dag("aks_cluster_cycle", cluster_dag("aks_cluster_cycle", STOP_RESTORE_START, **job))
        assert cycled.tasks == {"stop": "success", "restore": "success", "start": "success"}, _log(home)
        saved, restored = cycled.xcom("stop")["savepoint"], cycled.xcom("restore")
        assert restored["savepoint"]["id"] == saved["id"] and restored["generation"] == 2
        assert cycled.xcom("start")["generation"] == 2
        sent = feeder.stop()

        ends = {topic: {str(p): high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}}
        deadline = time.monotonic() + 120
        while JobHome(str(home)).status().get("last_offsets") != ends and time.monotonic() < deadline:
            time.sleep(1)
        stopped = run_dag("aks_cluster_stop", cluster_dag("aks_cluster_stop", FINAL_STOP, **job))
        assert stopped.tasks == {"stop": "success"} and stopped.xcom("stop")["state"] == "STOPPED"
        deadline = time.monotonic() + 60  # the driver's JVM ends its SparkContext after the job reports STOPPED
        while drivers_of(home) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not drivers_of(home), "the driver did not exit after STOPPED"
    finally:
        feeder.stop()
        _stop(home)  # a failed step must not leave a driver running

    assert JobHome(str(home)).status()["read_placement"]["mode"] == "auto", "version 2 runs the default"
    ids = output_ids(output)
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert set(ids) == {f"e{i}" for i in range(sent)}, "a record was lost"

    # Version 1 read on its executors: they bound the C reader from the shipped archive (./environment), not from
    # this machine's environment, as did any executor of a later application that read a batch.
    readers = _reader_lines(spark_cluster)
    assert first_app in readers, readers
    for app, lines in readers.items():
        assert all("/environment/bin/python" in line for line in lines), (app, lines)


def _reader_lines(cluster) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for log in cluster.executor_logs():
        app = log.parent.parent.name
        found.setdefault(app, []).extend(line for line in log.read_text(errors="replace").splitlines()
                                         if BOUND_MARKER in line)
    return {app: lines for app, lines in found.items() if lines}


def _log(home: Path) -> str:
    logs = sorted((home / "logs").glob("driver-*.log")) if (home / "logs").exists() else []
    return logs[-1].read_text(errors="replace")[-4000:] if logs else "(no driver log)"
