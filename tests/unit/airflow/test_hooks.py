"""The Airflow connections a job uses: ``kafka`` read as the Kafka provider reads it, storage from its own."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.hooks.job_home import JobHomeStorageHook
from airflow_kafka_stream.hooks.kafka import StreamKafkaHook
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from tests.airflow_helpers import kafka_connection, set_connection


def test_the_kafka_hook_is_the_providers_and_drops_the_connections_group(monkeypatch):
    from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

    set_connection(monkeypatch, "kafka_jobs", kafka_connection("b:9092", **{"group.id": "shared", "acks": "all"}))
    hook = StreamKafkaHook("kafka_jobs")
    assert isinstance(hook, KafkaBaseHook) and hook.conn_type == "kafka"
    assert hook.client_config() == {"bootstrap.servers": "b:9092", "acks": "all"}, "a group is the job's, not the conn's"
    assert hook.driver_config() == hook.client_config()


@pytest.mark.parametrize(("extra", "needle", "why"), [
    pytest.param({}, "has no 'bootstrap.servers' in its extra", "the provider's own check, in our words",
                 id="1-no-brokers"),
    pytest.param({"bootstrap.servers": "b:9092", "oauth_cb": "my_pkg.auth.token"}, "callback_allowlist",
                 "a callback by dotted path is resolved only when Airflow's allowlist names it",
                 id="2-callback-not-allowed"),
])
def test_a_connection_the_provider_refuses_is_refused_naming_the_connection(monkeypatch, extra, needle, why):
    set_connection(monkeypatch, "kafka_bad", json.dumps({"conn_type": "kafka", "extra": extra}))
    with pytest.raises(InvalidInputError, match=needle) as refused:
        StreamKafkaHook("kafka_bad").client_config()
    assert "kafka_bad" in str(refused.value) and refused.value.settings == ("kafka_conn_id",), why


def test_a_driver_cannot_get_a_callback_the_control_plane_may_use(monkeypatch):
    set_connection(monkeypatch, "kafka_cb", kafka_connection("b:9092", **{"stats_cb": "tests.unit.airflow.test_hooks.noop"}))
    monkeypatch.setenv("AIRFLOW__APACHE_KAFKA__CALLBACK_ALLOWLIST", "tests.unit.airflow.test_hooks.noop")
    hook = StreamKafkaHook("kafka_cb")
    resolved = hook.client_config()["stats_cb"]
    assert callable(resolved) and resolved.__name__ == "noop", "the provider resolves an allowed callback"
    with pytest.raises(InvalidInputError, match="stats_cb: a callback cannot reach a Spark driver"):
        hook.driver_config()


def noop(*_args) -> None:
    """A callback an allowlist can name."""


def test_storage_credentials_come_from_their_own_connection(monkeypatch, tmp_path):
    set_connection(monkeypatch, "jobs_s3", json.dumps({"conn_type": "aws", "login": "AKIA", "password": "s3cret",
                                                       "extra": {"client_kwargs": {"endpoint_url": "http://s3"}}}))
    assert JobHomeStorageHook("s3://b/jobs/a", "jobs_s3").storage_options() == {
        "client_kwargs": {"endpoint_url": "http://s3"}, "key": "AKIA", "secret": "s3cret"}
    assert JobHomeStorageHook(str(tmp_path)).storage_options() == {}
    ok, message = JobHomeStorageHook(str(tmp_path / "nowhere")).test_connection()
    assert not ok and "nowhere" in message


def test_a_job_hook_without_kafka_refuses_what_needs_it_naming_the_parameter():
    with pytest.raises(InvalidInputError, match="needs Kafka") as refused:
        StreamJobHook("/tmp/job", kafka_conn_id=None).kafka_config()
    assert refused.value.settings == ("kafka_conn_id",)
