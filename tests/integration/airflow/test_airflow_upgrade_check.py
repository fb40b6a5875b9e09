"""The stream_upgrade DAG and its check, through Airflow, against a running stateful job.

One job for the module: the example pipeline's ``--totals`` (a running amount and count per key in the HDFS state
store), fed continuously, version 1 started directly. Version 2 (``tests/apps/totals_key_long.py``) changes the
state's key type. Through ``dag.test()`` with real spark-submit drivers:

* the upgrade as asked (keeping the state) fails in its standby task, before the old version is asked to stop;
* ``check_only`` reports ``needs drop_state`` in XCom, skips every task of the upgrade and changes nothing;
* the upgrade with ``drop_state`` goes through.

The new version's arguments (``--totals`` and the rest) are given as the DAG's ``application_args``.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.ops.stop import stop_job
from airflow_kafka_stream.storage.jobhome import STANDBY_RECORD
from tests.airflow_helpers import kafka_connection, run_dag
from tests.integration.airflow.test_airflow_upgrade import APPS, example_dag
from tests.integration.lifecycle.test_standby import fed_and_running
from tests.integration.lifecycle.test_upgrade_rehearsal import TOTALS, TotalsJob, still_runs_untouched

pytestmark = pytest.mark.integration

#: Short gates and waits: the module's upgrades need only show the order of events.
FAST = {"health_batches": 1, "health_window_seconds": 5, "health_startup_seconds": 240, "stop_timeout_seconds": 60,
        "health_timeout_seconds": 240}
UPGRADE_TASKS = ("start_standby", "stop_with_savepoint", "restore_without_state", "submit_new_version",
                 "health_gate", "rollback_stop_new_version", "rollback_restore_savepoint",
                 "rollback_submit_previous_version", "outcome")


@pytest.fixture(scope="module")
def job(tmp_path_factory, kafka_bootstrap, airflow_db):
    with pytest.MonkeyPatch.context() as patch, fed_and_running(
            TotalsJob(tmp_path_factory.mktemp("upgrade-check"), kafka_bootstrap, extra=TOTALS)) as running:
        patch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", kafka_connection(kafka_bootstrap))
        patch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
        running.dag = example_dag("stream_upgrade")
        try:
            yield running
        finally:
            _end_new_version(running)


def _end_new_version(job: TotalsJob) -> None:
    """Stop the version the upgrade started (spark-submit's driver is not one of the fixture's processes)."""
    if job.jobhome.spec().get("version") == "1":
        return
    try:
        stop_job(job.jobhome, 120)
    except Exception:  # noqa: BLE001 - then it is killed
        pid = job.status().get("pid")
        if pid:
            try:
                os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def conf(job: TotalsJob, version: str, **more) -> dict:
    """The DAG's params for version ``version`` of the totals job: the example pipeline's arguments and --totals."""
    args = ["--home", str(job.home), "--bootstrap", job.bootstrap, "--topic", job.topic, "--group", job.group,
            "--output", str(job.output), "--heartbeat-seconds", "3", "--app-version", version,
            "--trigger-interval", "500 milliseconds", *TOTALS]
    return {"job_home": str(job.home), "topics": [job.topic], "group": job.group, "output_path": str(job.output),
            "new_version": version, "application": str(APPS / "totals_key_long.py"), "application_args": args,
            **FAST, **more}


def test_check_only_must_be_a_boolean(airflow_db):
    from airflow.sdk.definitions.param import ParamValidationError

    from tests.airflow_helpers import load_dag

    dag = load_dag(example_dag("stream_upgrade"), "stream_upgrade")
    assert dag.params["check_only"] is False and dag.params.get_param("check_only").description
    with pytest.raises(ParamValidationError):
        dag.test(run_conf={"new_version": "2", "check_only": "yes"}, logical_date=None)


def test_an_upgrade_keeping_an_incompatible_state_fails_in_its_standby_before_any_stop(job):
    before = job.status()
    refused = run_dag("stream_upgrade", path=job.dag, conf=conf(job, "2"))
    assert refused.tasks["upgrade.start_standby"] == "failed", refused.tasks
    assert refused.tasks["upgrade.stop_with_savepoint"] == "upstream_failed", refused.tasks
    assert (refused.tasks["check_upgrade"], refused.tasks["upgrade.outcome"]) == ("skipped", "failed"), refused.tasks
    record = job.jobhome.read_control(STANDBY_RECORD)
    assert (record["version"], record["state"]) == ("2", rules.StandbyState.FAILED), record
    assert record["rehearsal"]["verdict"] == "needs drop_state", record
    still_runs_untouched(job, before)
    assert not (job.home / "savepoints").exists() or not any((job.home / "savepoints").iterdir())


def test_check_only_reports_needs_drop_state_and_changes_nothing(job):
    before = job.status()
    generations = sorted(p.name for p in (job.home / "checkpoints").iterdir())
    checked = run_dag("stream_upgrade", path=job.dag, conf=conf(job, "3", check_only=True))
    assert checked.tasks["check_upgrade"] == "failed", checked.tasks  # the upgrade as asked would not go on
    assert checked.tasks["upgrade_unless_check_only"] == "success", checked.tasks
    assert {checked.tasks[f"upgrade.{task}"] for task in UPGRADE_TASKS} == {"skipped"}, checked.tasks
    found = checked.xcom("check_upgrade")
    assert (found["verdict"], found["would_upgrade"], found["drop_state"]) == ("needs drop_state", False, False), found
    assert "expects key schema (_groupingexpression bigint, the query's key)" in found["reason"], found
    # Nothing of the job changed: same driver, generation and query, still committing; no stop, no savepoint.
    still_runs_untouched(job, before)
    assert sorted(p.name for p in (job.home / "checkpoints").iterdir()) == generations
    assert not (job.home / "savepoints").exists() or not any((job.home / "savepoints").iterdir())
    assert not (job.home / "control" / "stop").exists()
    assert job.jobhome.spec()["version"] == "1"
    history = job.jobhome.history()
    check = [r for r in history if r["operation"] == "upgrade-check"]
    assert check and check[-1]["after"]["verdict"] == "needs drop_state", check
    record = job.jobhome.read_control(STANDBY_RECORD)
    assert (record["version"], record["state"]) == ("3", rules.StandbyState.ENDED), record


def test_the_upgrade_with_drop_state_goes_through(job):
    before = job.status()
    done = run_dag("stream_upgrade", path=job.dag, conf=conf(job, "4", drop_state=True))
    assert done.tasks["upgrade.outcome"] == "success", done.tasks
    assert (done.tasks["check_upgrade"], done.tasks["upgrade.restore_without_state"]) == ("skipped", "success")
    assert done.xcom("upgrade.submit_new_version", key="submit")["action"] == "handed-over"
    status = job.status()
    assert job.jobhome.spec()["version"] == "4" and status["state"] == "RUNNING", status
    assert status["generation"] > before["generation"], "drop_state starts a new generation"
    record = job.jobhome.read_control(STANDBY_RECORD)
    assert (record["version"], record["state"], record["pid"]) == ("4", rules.StandbyState.ACTIVE, status["pid"]), record
