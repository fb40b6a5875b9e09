"""Every task of every example DAG works on the run's job and has the "Stream job" link to its page, also as
the scheduler and the UI see the DAG (serialized): a run shows the link on each step, the short circuit of
stream_upgrade included."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from airflow_kafka_stream.links.job_page import StreamJobPageLink

#: Example DAGs that operate no job: a downstream consumer of a job's output asset.
DOWNSTREAM = ("stream_output_hourly",)
DAGS = sorted(p for p in (Path(__file__).resolve().parents[3] / "dags").glob("*.py") if p.stem not in DOWNSTREAM)


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_dag_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


@pytest.mark.parametrize("path", DAGS, ids=lambda p: p.stem)
def test_every_task_of_the_example_dag_links_to_the_job_page(path: Path, monkeypatch) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    # Deserializing as the UI's api-server does (its DagBag loads operator links). The flag is a class attribute
    # the scheduler's and the DAG processor's code paths (dag.test() among them) set to False for the process.
    monkeypatch.setattr(DagSerialization, "_load_operator_extra_links", True)
    dag = load(path)
    assert dag.tasks
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    for task in dag.tasks:
        assert getattr(task, "job_home", None) == "{{ params.job_home }}", \
            f"{dag.dag_id}.{task.task_id} takes no job home (the run's)"
        links = [link for link in task.operator_extra_links if isinstance(link, StreamJobPageLink)]
        assert links, f"{dag.dag_id}.{task.task_id} has no Stream job link"
        assert StreamJobPageLink.name in serialized.get_task(task.task_id).extra_links, \
            f"{dag.dag_id}.{task.task_id} loses its link once serialized"


def test_the_upgrade_dags_short_circuit_is_among_them() -> None:
    dag = load(next(p for p in DAGS if p.stem == "stream_upgrade"))
    assert "upgrade_unless_check_only" in dag.task_ids


@pytest.mark.parametrize(("check_only", "upgrades"), [(True, False), ("True", False), (False, True), ("false", True)])
def test_the_short_circuit_passes_unless_the_run_only_checks(check_only, upgrades) -> None:
    from airflow_kafka_stream.operators.upgrade_check import UpgradeUnlessCheckOnlyOperator

    task = UpgradeUnlessCheckOnlyOperator(task_id="gate", job_home="/jobs/orders", check_only=check_only)
    assert task.python_callable(*task.op_args) is upgrades


@pytest.mark.parametrize("path", DAGS, ids=lambda p: p.stem)
def test_every_param_a_task_renders_is_declared_by_its_example_dag(path: Path) -> None:
    """A template naming a param the DAG lacks renders only when a run's conf happens to give it: any other run
    fails at that task (Jinja's "'dict object' has no attribute ...")."""
    import re

    dag = load(path)
    for task in dag.tasks:
        for field in task.template_fields:
            text = repr(getattr(task, field, None))
            for name in re.findall(r"params\.(\w+)", text):
                assert name in dag.params, f"{dag.dag_id}.{task.task_id}.{field} renders params.{name}, not declared"


def test_an_upgrade_run_that_names_no_pipeline_setting_keeps_the_running_versions() -> None:
    """A run of stream_upgrade given only the job and the new version (as from the UI's form) renders no topics,
    group or output, so the new version starts with the running version's arguments (``ops.submission_plan``);
    a default there would move a job that reads other topics onto the demo's. A submit still has the demo's."""
    params = load(next(p for p in DAGS if p.stem == "stream_upgrade")).params
    params.update({"job_home": "/jobs/payments", "new_version": "2"})  # what the form's run gives, validated
    upgrade = params.validate()
    assert (upgrade["topics"], upgrade["group"], upgrade["output_path"], upgrade["source"]) == (None,) * 4
    submit = load(next(p for p in DAGS if p.stem == "stream_submit")).params.validate()
    assert submit["topics"] and submit["group"] and submit["output_path"]
