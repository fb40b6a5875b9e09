"""Run a DAG with real Airflow (``dag.test()``: scheduler loop, task runner and triggers in-process).

A DAG must live in the DAGs folder to be serialized and run, so :func:`run_dag`
writes the DAG's source there, imports it from that file and runs it; the
outcome gives each task's state and every XCom the run pushed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import AIRFLOW_HOME

DAGS = AIRFLOW_HOME / "dags"


@dataclass
class DagOutcome:
    state: str
    tasks: dict[str, str | None]
    xcoms: dict[tuple[str, str], Any]
    #: Each task's rendered template fields as Airflow stored them (what the UI's "Rendered" tab shows).
    rendered: dict[str, Any]

    def xcom(self, task_id: str, key: str = "return_value") -> Any:
        return self.xcoms.get((task_id, key))


def load_dag(path: Path, dag_id: str):
    spec = importlib.util.spec_from_file_location(f"aks_test_dag_{dag_id}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, "dag", None) or next(v for v in vars(module).values() if getattr(v, "dag_id", None) == dag_id)


def write_dag(dag_id: str, source: str) -> Path:
    path = DAGS / f"{dag_id}.py"
    path.write_text(textwrap.dedent(source))
    return path


def run_dag(dag_id: str, source: str | None = None, conf: dict | None = None, path: Path | None = None) -> DagOutcome:
    """Write (or take) a DAG file in the DAGs folder and run it once with ``dag.test``."""
    from airflow import settings
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel

    if source is not None:
        path = write_dag(dag_id, source)
    assert path is not None
    dag = load_dag(path, dag_id)
    run = dag.test(run_conf=conf, logical_date=None)
    session = settings.Session()
    tasks = {ti.task_id: (str(ti.state) if ti.state else None) for ti in run.get_task_instances(session=session)}
    rows = session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run.run_id).all()
    rendered = session.query(RenderedTaskInstanceFields).filter(
        RenderedTaskInstanceFields.dag_id == dag_id, RenderedTaskInstanceFields.run_id == run.run_id).all()
    return DagOutcome(str(run.state), tasks, {(row.task_id, row.key): row.value for row in rows},
                      {row.task_id: row.rendered_fields for row in rendered})


def kafka_connection(bootstrap: str, **extra: Any) -> str:
    """An AIRFLOW_CONN_* value for a ``kafka`` connection holding a librdkafka config."""
    return json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap, **extra}})


def set_connection(monkeypatch, conn_id: str, value: str) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", value)
    assert os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] == value
