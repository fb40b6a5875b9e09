"""The example DAGs' Params are validated by Airflow before any task runs (as the UI form and REST API do)."""

from __future__ import annotations

import shutil

import pytest

from tests.airflow_helpers import DAGS, load_dag
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

DAG_IDS = ["stream_submit", "stream_stop", "stream_upgrade", "stream_offset_reset", "stream_verify",
           "stream_savepoint", "stream_savepoint_housekeeping", "stream_watchdog", "stream_supervisor",
           "stream_restore", "stream_resume", "stream_output_hourly"]


def example(dag_id: str):
    target = DAGS / f"{dag_id}.py"
    shutil.copy(ROOT / "dags" / f"{dag_id}.py", target)
    return load_dag(target, dag_id)


def test_every_example_dag_loads_without_import_errors(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == sorted(DAG_IDS)
    schedules = {dag_id: bag.get_dag(dag_id).schedule for dag_id in DAG_IDS}
    assert schedules["stream_verify"] == schedules["stream_watchdog"] == "*/5 * * * *"
    assert schedules["stream_savepoint_housekeeping"] == "@daily"
    assert schedules["stream_savepoint"] == "@hourly", "periodic restore points"
    assert schedules["stream_upgrade"] is None and schedules["stream_offset_reset"] is None
    assert schedules["stream_restore"] is None and schedules["stream_resume"] is None, "the job page's actions"
    assert schedules["stream_supervisor"] is None, "triggered once per submitted job, then it defers"
    # Once per complete hour of the job's output, as the job announces it (docs/assets.md).
    assert type(schedules["stream_output_hourly"]).__name__ == "PartitionedAssetTimetable"


@pytest.mark.parametrize(("dag_id", "conf", "why"), [
    ("stream_offset_reset", {"strategy": "to-yesterday"}, "a strategy outside the enum"),
    ("stream_offset_reset", {"strategy": "to-datetime", "datetime": "2026-11-22T08:00:00"}, "a date-time without zone"),
    ("stream_offset_reset", {"strategy": "to-datetime", "datetime": "yesterday"}, "not a date-time"),
    ("stream_upgrade", {}, "the new version is required"),
    ("stream_upgrade", {"new_version": "2", "health_batches": 0}, "at least one batch"),
    ("stream_stop", {"on_timeout": "shrug"}, "on_timeout outside the enum"),
    ("stream_submit", {"topics": []}, "at least one topic"),
])
def test_invalid_params_are_refused_before_any_task_runs(airflow_db, dag_id, conf, why):
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.param import ParamValidationError

    dag = example(dag_id)
    session = settings.Session()
    def run_ids() -> set[str]:
        return {run.run_id for run in session.query(DagRun).filter(DagRun.dag_id == dag_id)}

    before = run_ids()
    with pytest.raises(ParamValidationError):
        dag.test(run_conf=conf, logical_date=None)
    # No run was created (an earlier test's run of the same DAG may be cleared by dag.test, so not "equal").
    assert run_ids() <= before, why


def test_no_template_needs_a_logical_date(airflow_db):
    """Runs from the UI, CLI or REST API have no logical date: no template of an example DAG may use one."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    dated = ("ds", "ts", "logical_date", "data_interval", "execution_date", "prev_ds", "next_ds")
    for dag_id in DAG_IDS:
        for task in bag.get_dag(dag_id).tasks:
            for field in task.template_fields:
                text = str(getattr(task, field, ""))
                assert not any(f"{{{{ {name}" in text or f"{{{{{name}" in text for name in dated), (dag_id, field)
