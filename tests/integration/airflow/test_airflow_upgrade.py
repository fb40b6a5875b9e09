"""The example DAGs end to end with real Airflow, real spark-submit drivers and a real broker.

One job, fed continuously, goes through stream_submit (v1), stream_upgrade through a warm standby to a
healthy v2, an upgrade to a v3 that takes over and consumes nothing (rolled back to v2 from its pre-upgrade
savepoint), and stream_stop. Record by record, nothing is lost or duplicated. Along the way Airflow's
``[openlineage]`` points at a local receiver: every event the tasks and the drivers emit validates against the
OpenLineage spec, and the drivers' runs are one streaming job whose parents are the tasks that launched them. (An upgrade whose standby fails
ends before any stop with the job untouched: test_airflow_upgrade_check drives that through the same DAG.)
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from airflow_kafka_stream.storage.jobhome import STANDBY_RECORD, JobHome
from tests.airflow_helpers import DAGS, kafka_connection, run_dag, set_connection
from tests.conftest import ROOT
from tests.integration.airflow.test_airflow_submit import drivers_of
from tests.kafka_utils import create_topic, produce, unique, watermarks
from tests.lineage_receiver import LineageReceiver, airflow_lineage_on, check_driver_runs, launchers

pytestmark = pytest.mark.integration

PARTITIONS = 2
APPS = ROOT / "tests" / "apps"


def example_dag(name: str) -> Path:
    target = DAGS / f"{name}.py"
    shutil.copy(ROOT / "dags" / f"{name}.py", target)
    return target


class Feeder(threading.Thread):
    """Produces JSON events with unique ids, ten in one burst every four seconds (or every ``interval`` seconds),
    until stopped; none while ``paused`` is set.

    Each burst is a micro-batch for every driver that reads the topic (Spark's default trigger), and the suite's
    two cores are what it runs on: measured with the tests' JVM options, a small batch of the example pipeline
    costs its driver's JVM about 0.75 CPU-second (two Parquet writes and a dead-letter count), so a driver fed a
    burst every two seconds kept 37% of a core busy (one record every two seconds, measured); every four
    seconds halves that. A burst every four seconds still gives every health window (10 s) its batches and
    every transition records in flight."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 4.0):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.sent, self.done = bootstrap, topic, 0, threading.Event()
        self.interval, self.paused = interval, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            if not self.paused.is_set():
                # Eight keys: the default partitioner spreads them over every partition of a 2- or 4-partition topic.
                produce(self.bootstrap, self.topic, [(f"k{i % 8}", json.dumps({"id": f"e{i}", "key": f"k{i % 8}",
                                                                                "amount": i}))
                                                     for i in range(self.sent, self.sent + 10)])
                self.sent += 10
            self.done.wait(self.interval)

    def stop(self) -> int:
        self.done.set()
        self.join(30)
        return self.sent


def output_ids(output: Path) -> list[str]:
    return [row["id"] for row in ds.dataset(str(output / "events"), format="parquet",
                                            partitioning="hive").to_table(columns=["id"]).to_pylist()]


def test_upgrade_succeeds_and_rolls_back_failed_versions_exactly_once(tmp_path, kafka_bootstrap, airflow_db,
                                                                       monkeypatch):
    receiver = LineageReceiver()
    lineage_off = airflow_lineage_on(monkeypatch, receiver, "aks-test")
    topic = create_topic(kafka_bootstrap, unique("af-upgrade"), PARTITIONS)
    home, output = tmp_path / "home", tmp_path / "out"
    set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
    set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    job = {"job_home": str(home), "topics": [topic], "group": unique("af-upgrade-group"), "output_path": str(output)}
    upgrade = example_dag("stream_upgrade")
    # A fresh first batch may be slow (startup 90 s of grace); after it, 10 s of lag not growing is healthy.
    fast = {"health_batches": 1, "health_window_seconds": 10, "health_startup_seconds": 180, "stop_timeout_seconds": 20,
            "health_timeout_seconds": 180}
    feeder = Feeder(kafka_bootstrap, topic)
    feeder.start()
    try:
        try:
            _upgrade_twice(home, job, upgrade, fast)
        finally:
            sent = feeder.stop()

        ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
        wanted = {topic: {str(p): end for p, end in ends.items()}}
        deadline = time.monotonic() + 120
        while JobHome(str(home)).status().get("last_offsets") != wanted and time.monotonic() < deadline:
            time.sleep(1)
        stopped = run_dag("stream_stop", path=example_dag("stream_stop"), conf={"job_home": str(home)})
        assert stopped.tasks == {"stop": "success"}
        assert stopped.xcom("stop")["state"] == "STOPPED" and stopped.xcom("stop")["savepoint"]["id"]

        ids = output_ids(output)
        assert len(ids) == len(set(ids)), "a record was written twice"
        assert set(ids) == {f"e{i}" for i in range(sent)}, "a record was lost"
        check_lineage(receiver, kafka_bootstrap, topic, home, output)
    finally:
        lineage_off()
        receiver.close()


def _upgrade_twice(home: Path, job: dict, upgrade: Path, fast: dict) -> None:
    """Version 1 submitted, upgraded to a healthy 2, then to a 3 that consumes nothing and is rolled back to 2."""
    submitted = run_dag("stream_submit", path=example_dag("stream_submit"), conf={**job, "app_version": "1"})
    assert submitted.tasks == {"submit": "success"}

    good = run_dag("stream_upgrade", path=upgrade, conf={**job, **fast, "new_version": "2"})
    assert good.tasks["upgrade.outcome"] == "success", good.tasks
    assert good.tasks["upgrade.rollback_stop_new_version"] == "skipped"
    standby = good.xcom("upgrade.start_standby")
    assert good.xcom("upgrade.submit_new_version", key="submit")["action"] == "handed-over"
    took_over = JobHome(str(home)).read_control(STANDBY_RECORD)  # its pid is the driver's, not spark-submit's
    assert (took_over["token"], took_over["state"]) == (standby["token"], "ACTIVE")
    assert (JobHome(str(home)).status()["pid"], JobHome(str(home)).spec()["version"]) == (took_over["pid"], "2")
    first_savepoint = good.xcom("upgrade.stop_with_savepoint")["savepoint"]["id"]
    pinned = [r["args"] for r in JobHome(str(home)).history() if r["operation"] == "savepoint-pin"]
    assert pinned[-1] == {"savepoint": first_savepoint, "reason": "upgrade to version 2 may roll back to it"}

    # A standby that takes over and consumes nothing fails the health gate: the normal rollback.
    # Its first batch never ends, so the gate waits out the startup grace: 30 s is enough to tell.
    failed = run_dag("stream_upgrade", path=upgrade, conf={**job, **fast, "health_startup_seconds": 30,
                                                           "new_version": "3",
                                                           "application": str(APPS / "stalled_version.py")})
    assert (failed.tasks["upgrade.start_standby"], failed.tasks["upgrade.health_gate"]) == ("success", "failed")
    assert failed.tasks["upgrade.outcome"] == "failed", failed.tasks
    for step in ("rollback_stop_new_version", "rollback_restore_savepoint", "rollback_submit_previous_version"):
        assert failed.tasks[f"upgrade.{step}"] == "success", (step, failed.tasks)
    savepoint = failed.xcom("upgrade.stop_with_savepoint")["savepoint"]["id"]
    restored = failed.xcom("upgrade.rollback_restore_savepoint")
    assert restored["savepoint"]["id"] == savepoint
    status = JobHome(str(home)).status()
    assert (status["state"], JobHome(str(home)).spec()["version"]) == ("RUNNING", "2")
    assert status["generation"] == restored["generation"]
    assert len(drivers_of(home)) >= 1
    history = [r["operation"] for r in JobHome(str(home)).history()]
    assert history.count("restore") == 1 and history.count("standby-go") == 2
    assert first_savepoint not in json.loads((home / "control" / "pins.json").read_text())


def check_lineage(receiver: LineageReceiver, bootstrap: str, topic: str, home: Path, output: Path) -> None:
    """Every event validates; the drivers' runs are one streaming job (``home``, the job's name), each with its own
    run id, a START, a parent that is the Airflow task run that launched it, the real topic in and sink out."""
    events = receiver.wait_for(lambda found: any(
        e["eventType"] == "COMPLETE" and e["job"]["name"] == "stream_stop.stop" for e in found), timeout=60)
    runs = check_driver_runs(events, home.name, "aks-test")
    # v1, v2's standby, v3's standby and v2 again after the rollback: each its own run of the one job.
    assert len(runs) >= 4, {run: [e["eventType"] for e in found] for run, found in runs.items()}
    assert {"stream_submit.submit", "stream_upgrade.upgrade.start_standby",
            "stream_upgrade.upgrade.rollback_submit_previous_version"} <= launchers(runs), launchers(runs)
    first = min(runs.values(), key=lambda found: found[0]["eventTime"])
    assert [e["eventType"] for e in first][-1] == "COMPLETE", "version 1 stopped gracefully for the upgrade"
    last = max(runs.values(), key=lambda found: found[0]["eventTime"])
    assert [e["eventType"] for e in last][-1] == "COMPLETE", "the stop at the end"
    kafka = f"kafka://{bootstrap.split(',')[0]}"
    running = [e for found in runs.values() for e in found if e["eventType"] == "RUNNING"]
    assert running, "RUNNING events at the 5 s interval"
    for event in running:
        assert [(i["namespace"], i["name"]) for i in event["inputs"]] == [(kafka, topic)]
        assert set(event["inputs"][0]["inputFacets"]["kafkaStreamPosition"]["partitions"]) == {"0", "1"}
        assert [(o["namespace"], o["name"]) for o in event["outputs"]] == [("file", str(output))]
    stop = next(e for e in events if e["job"]["name"] == "stream_stop.stop" and e["eventType"] == "COMPLETE")
    assert [(i["namespace"], i["name"]) for i in stop["inputs"]] == [(kafka, topic)]
    assert [(o["namespace"], o["name"]) for o in stop["outputs"]] == [("file", str(output))]
    assert stop["run"]["facets"]["streamingJob"]["name"] == home.name
