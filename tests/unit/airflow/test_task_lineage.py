"""The Airflow side of lineage: the operators' facets, and what a launched driver gets from ``[openlineage]``."""

from __future__ import annotations

import json

import pytest
from openlineage.client.serde import Serde

from airflow_kafka_stream.hooks.lineage import driver_lineage_env, lineage_env
from airflow_kafka_stream.operators.lineage import STREAMING_JOB_SCHEMA, STREAMING_JOB_SCHEMA_URL
from airflow_kafka_stream.operators.reset import StreamResetOperator
from airflow_kafka_stream.operators.stop import StreamStopOperator
from airflow_kafka_stream.operators.submit import StreamSubmitOperator
from tests.airflow_helpers import kafka_connection, set_connection
from tests.lineage_receiver import validate_event

TRANSPORT = {"type": "http", "url": "http://marquez:5000", "auth": {"type": "api_key", "apiKey": "s3cret"}}


@pytest.mark.parametrize(("given", "wanted", "why"), [
    pytest.param({"enabled": False}, {}, "disabled or unconfigured in Airflow: the driver gets nothing", id="1-off"),
    pytest.param({}, {"OPENLINEAGE_NAMESPACE": "prod", "OPENLINEAGE__TRANSPORT": json.dumps(TRANSPORT),
                      "OPENLINEAGE_PARENT_ID": "p", "OPENLINEAGE_ROOT_PARENT_ID": "r"},
                 "Airflow's transport, namespace and the task as parent", id="2-airflows-transport"),
    pytest.param({"job_env": {"OPENLINEAGE_URL": "http://own", "OPENLINEAGE_API_KEY": "k",
                              "OPENLINEAGE_PARENT_ID": "stale", "PATH": "/bin"}},
                 {"OPENLINEAGE_NAMESPACE": "prod", "OPENLINEAGE_PARENT_ID": "p", "OPENLINEAGE_ROOT_PARENT_ID": "r",
                  "OPENLINEAGE_URL": "http://own", "OPENLINEAGE_API_KEY": "k"},
                 "a job that configures its client keeps its own transport (given on, for a driver in a cluster), "
                 "still under this task", id="3-own-client"),
    pytest.param({"transport": {}, "config_path": "/etc/ol.yml", "parent_id": None, "root_parent_id": None},
                 {"OPENLINEAGE_NAMESPACE": "prod", "OPENLINEAGE_CONFIG": "/etc/ol.yml"},
                 "Airflow's config file, outside a task: no parent", id="4-config-file"),
])
def test_what_a_driver_gets_from_airflows_openlineage_settings(given, wanted, why):
    args = {"enabled": True, "transport": TRANSPORT, "config_path": "", "namespace": "prod", "parent_id": "p",
            "root_parent_id": "r", "job_env": {}, **given}
    assert lineage_env(**args) == wanted, why


@pytest.fixture
def airflow_openlineage(monkeypatch):
    """Airflow's [openlineage] read afresh from the environment (the provider caches each setting)."""
    from airflow.providers.openlineage import conf as ol_conf

    def clear() -> None:
        for value in vars(ol_conf).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()

    clear()
    yield monkeypatch
    monkeypatch.undo()
    clear()


def test_a_launch_outside_a_task_gets_airflows_transport_and_no_parent(airflow_openlineage):
    airflow_openlineage.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(TRANSPORT))
    airflow_openlineage.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "prod")
    env = driver_lineage_env({})
    assert env == {"OPENLINEAGE_NAMESPACE": "prod", "OPENLINEAGE__TRANSPORT": json.dumps(TRANSPORT)}


def test_with_openlineage_unconfigured_in_airflow_a_driver_gets_nothing(airflow_openlineage):
    for name in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "AIRFLOW__OPENLINEAGE__TRANSPORT"):
        airflow_openlineage.delenv(name, raising=False)
    assert driver_lineage_env({}) == {}


def _job_home(tmp_path, **spec) -> str:
    home = tmp_path / "home"
    home.mkdir()
    (home / "job.json").write_text(json.dumps({"job": "orders", "version": "2", "topics": ["orders"],
                                               "kafka": {"bootstrap.servers": "b1:9092"},
                                               "sink": {"kind": "file", "path": "/lake/orders"}, **spec}))
    return str(home)


def _facet_json(lineage) -> dict:
    return json.loads(Serde.to_json(lineage.run_facets["streamingJob"]))


def test_a_stop_reports_the_jobs_topics_sink_and_identity_from_its_job_json(tmp_path, airflow_openlineage):
    airflow_openlineage.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "prod")
    home = _job_home(tmp_path)
    task = StreamStopOperator(task_id="stop", job_home=home)
    for lineage in (task.get_openlineage_facets_on_start(), task.get_openlineage_facets_on_complete(None)):
        assert [(d.namespace, d.name) for d in lineage.inputs] == [("kafka://b1:9092", "orders")]
        assert [(d.namespace, d.name) for d in lineage.outputs] == [("file", "/lake/orders")]
        facet = _facet_json(lineage)
        assert (facet["namespace"], facet["name"], facet["jobHome"], facet["appVersion"]) == ("prod", "orders",
                                                                                             home, "2")
        event = {"eventType": "START", "eventTime": "2026-12-04T10:00:00Z", "producer": "urn:x",
                 "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                 "run": {"runId": "0190a0c1-0000-7000-8000-000000000001", "facets": {"streamingJob": facet}},
                 "job": {"namespace": "prod", "name": "dag.stop"}}
        assert validate_event(event, {STREAMING_JOB_SCHEMA_URL: STREAMING_JOB_SCHEMA}) == ["streamingJob"]


def test_a_first_submit_reports_what_it_was_given_before_the_job_home_exists(tmp_path, monkeypatch):
    set_connection(monkeypatch, "kafka_default", kafka_connection("b1:9092,b2:9092"))
    task = StreamSubmitOperator(task_id="submit", job_home=str(tmp_path / "new"), app_version="1",
                                topics=["orders", "refunds"], group="g", output_path="s3a://lake/orders")
    lineage = task.get_openlineage_facets_on_start()
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("kafka://b1:9092", "orders"),
                                                               ("kafka://b1:9092", "refunds")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("s3://lake", "orders")]
    assert _facet_json(lineage)["name"] == "new"


def test_lineage_that_cannot_be_built_never_fails_the_task(capsys):
    task = StreamResetOperator(task_id="reset", job_home="ftp://host/jobs/orders", strategy="to-latest")
    lineage = task.get_openlineage_facets_on_start()
    assert (lineage.inputs, lineage.outputs, lineage.run_facets) == ([], [], {})
    logged = capsys.readouterr().out  # the task's logger writes through Airflow's structlog
    assert "warning" in logged and "no OpenLineage facets for job ftp://host/jobs/orders" in logged
