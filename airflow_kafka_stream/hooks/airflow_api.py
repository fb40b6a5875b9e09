"""The Airflow API connection a driver announces its output asset through (docs/assets.md).

``[airflow_kafka_stream] airflow_api_conn_id`` names it (default ``airflow_api``): an ``http`` connection whose
host (with scheme and port) is the API server's base URL, with the login and password of a user allowed to
create asset events, or ``{"token": "..."}`` in its extra. Every driver the launcher starts gets it in its
environment (``runtime.airflow_api.AIRFLOW_API_ENV``), never in its arguments; without the connection the
driver is given none and a job that declares an output asset says so in its status.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.configuration import conf
from airflow.exceptions import AirflowNotFoundException
from airflow.sdk import BaseHook

from airflow_kafka_stream.runtime.airflow_api import AIRFLOW_API_ENV

DEFAULT_CONN_ID = "airflow_api"


def api_conn_id() -> str:
    return conf.get("airflow_kafka_stream", "airflow_api_conn_id", fallback=None) or DEFAULT_CONN_ID


def api_settings(connection: Any) -> dict[str, Any]:
    """The settings a driver's ``AirflowApi.from_env`` reads, from an ``http`` connection."""
    host = str(connection.host or "").rstrip("/")
    if "://" not in host:
        host = f"{connection.schema or 'http'}://{host}"
    url = f"{host}:{connection.port}" if connection.port else host
    settings: dict[str, Any] = {"url": url}
    token = (connection.extra_dejson or {}).get("token")
    if token:
        settings["token"] = str(token)
    if connection.login:
        settings.update(username=connection.login, password=connection.password or "")
    return settings


def airflow_api_env() -> dict[str, str]:
    """The driver's environment entry for the Airflow API connection; empty when it is not defined."""
    try:
        connection = BaseHook.get_connection(api_conn_id())
    except AirflowNotFoundException:
        return {}
    return {AIRFLOW_API_ENV: json.dumps(api_settings(connection))}
