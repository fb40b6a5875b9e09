"""The few calls of Airflow's REST API a driver makes to announce its output: find an asset, post its events.

The driver gets the API's address and credentials from the launcher in :data:`AIRFLOW_API_ENV` (a JSON object:
``url`` and either ``username``/``password``, exchanged for a JWT at ``/auth/token``, or a ``token``), made from
the Airflow connection ``[airflow_kafka_stream] airflow_api_conn_id`` names (``ops.asset_connection``). The
credentials never appear in a log line, an error or the status: errors name the request and the HTTP status.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from airflow_kafka_stream.errors import InvalidInputError, StreamError

AIRFLOW_API_ENV = "AIRFLOW_KAFKA_STREAM_AIRFLOW_API"
#: How long one request may take: the announcer's thread waits, never a batch.
REQUEST_TIMEOUT_SECONDS = 10.0


class AirflowApiError(StreamError):
    """A request to Airflow's API failed (its status and a short reason; never a credential)."""


@dataclass
class AirflowApi:
    """A client of Airflow's public REST API (``/api/v2``) with a username and password or a token."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    timeout: float = REQUEST_TIMEOUT_SECONDS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AirflowApi | None:
        """The API a launcher gave this driver (None when it gave none)."""
        text = (os.environ if environ is None else environ).get(AIRFLOW_API_ENV, "").strip()
        if not text:
            return None
        try:
            settings = json.loads(text)
        except json.JSONDecodeError:
            settings = None
        if not isinstance(settings, dict) or not settings.get("url"):
            raise InvalidInputError(f"{AIRFLOW_API_ENV} must be a JSON object with the API's url and a username "
                                    "and password or a token; its launcher sets it from the Airflow connection "
                                    "[airflow_kafka_stream] airflow_api_conn_id names")
        return cls(str(settings["url"]).rstrip("/"), settings.get("username"), settings.get("password"),
                   settings.get("token"))

    def asset_id(self, uri: str) -> int | None:
        """The id of the asset with exactly this URI, None when Airflow knows no such asset (no DAG declares it)."""
        _status, found = self._call("GET", f"/api/v2/assets?uri_pattern={quote(uri, safe='')}&limit=100")
        for asset in (found or {}).get("assets") or []:
            if asset.get("uri") == uri:
                return int(asset["id"])
        return None

    def recent_partition_keys(self, asset_id: int, limit: int = 100) -> set[str]:
        """The partition keys of the asset's newest events."""
        _status, found = self._call("GET", f"/api/v2/assets/events?asset_id={asset_id}&order_by=-timestamp"
                                           f"&limit={limit}")
        return {str(event["partition_key"]) for event in (found or {}).get("asset_events") or []
                if event.get("partition_key")}

    def create_event(self, asset_id: int, partition_key: str | None, extra: Mapping[str, Any]) -> dict:
        body: dict[str, Any] = {"asset_id": asset_id, "extra": dict(extra)}
        if partition_key:
            body["partition_key"] = partition_key
        _status, created = self._call("POST", "/api/v2/assets/events", body)
        return created or {}

    # -- requests ------------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request; a token refused as expired is renewed once with the username and password."""
        status, answer = self._send(method, path, body, self._bearer())
        if status == 401 and self.username:
            self.token = None
            status, answer = self._send(method, path, body, self._bearer())
        if status >= 400:
            raise AirflowApiError(f"{method} {path.split('?')[0]} on {self.url} answered HTTP {status}: "
                                  f"{_reason(answer)}")
        return status, answer

    def _bearer(self) -> str | None:
        if self.token is None and self.username:
            status, answer = self._send("POST", "/auth/token", {"username": self.username,
                                                                 "password": self.password or ""}, None)
            if status not in (200, 201) or not isinstance(answer, dict) or "access_token" not in answer:
                raise AirflowApiError(f"login to {self.url} as {self.username!r} failed with HTTP {status}: check "
                                      "the Airflow API connection's login and password")
            self.token = str(answer["access_token"])
        return self.token

    def _send(self, method: str, path: str, body: Any, token: str | None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json",
                                                  **({"Authorization": f"Bearer {token}"} if token else {})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the API's URL
                return response.status, _json(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (urllib.error.URLError, OSError) as exc:
            raise AirflowApiError(f"{method} {path.split('?')[0]}: Airflow's API at {self.url} cannot be reached "
                                  f"({getattr(exc, 'reason', exc)})") from None


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except json.JSONDecodeError:
        return raw[:300].decode(errors="replace")


def _reason(answer: Any) -> str:
    if isinstance(answer, dict) and "detail" in answer:
        return str(answer["detail"])[:300]
    return str(answer)[:300]
