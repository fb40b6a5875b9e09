"""The Airflow API connection a driver announces its output asset through, as the driver gets it."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.hooks.airflow_api import airflow_api_env, api_settings
from airflow_kafka_stream.runtime.airflow_api import AIRFLOW_API_ENV, AirflowApi, AirflowApiError


def connection(**fields):
    from airflow.models.connection import Connection

    return Connection(conn_id="airflow_api", conn_type="http", **fields)


def test_an_http_connection_becomes_the_apis_url_and_login():
    assert api_settings(connection(host="airflow.internal", port=8080, login="svc", password="pw")) == {
        "url": "http://airflow.internal:8080", "username": "svc", "password": "pw"}
    assert api_settings(connection(host="https://airflow.example/", login="svc"))["url"] == "https://airflow.example"
    assert api_settings(connection(host="airflow.internal", schema="https"))["url"] == "https://airflow.internal"
    assert api_settings(connection(host="a", extra=json.dumps({"token": "t0k"}))) == {"url": "http://a", "token": "t0k"}


def test_the_driver_gets_the_connection_in_its_environment_and_none_without_it(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_AIRFLOW_API", raising=False)
    assert airflow_api_env() == {}
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_API", json.dumps({"conn_type": "http", "host": "http://127.0.0.1:8080",
                                                                 "login": "svc", "password": "s3cret"}))
    api = AirflowApi.from_env(airflow_api_env())
    assert (api.url, api.username, api.password) == ("http://127.0.0.1:8080", "svc", "s3cret")
    assert "s3cret" not in repr(api)


def test_a_malformed_setting_is_refused_naming_the_connection_and_no_setting_means_no_api():
    assert AirflowApi.from_env({}) is None
    with pytest.raises(InvalidInputError, match="airflow_api_conn_id"):
        AirflowApi.from_env({AIRFLOW_API_ENV: "{not json"})


def test_an_unreachable_api_is_an_error_naming_it_without_the_password():
    api = AirflowApi("http://127.0.0.1:9", username="svc", password="s3cret", timeout=2)
    with pytest.raises(AirflowApiError) as failed:
        api.asset_id("file:///out")
    assert "cannot be reached" in str(failed.value) and "s3cret" not in str(failed.value)
