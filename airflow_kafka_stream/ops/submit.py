"""Submit a streaming job: start a detached driver unless one of this version already runs or starts.

The driver outlives the task that submits it (a streaming query runs for
days): the caller's ``launch`` starts it in its own session with its output in
a log file and returns at once. The decision (launch, wait for the driver that
is there, or refuse) is ``core.submit_rules``; this module reads the job home,
records the launch in ``control/launched.json`` so a retried submit sees a
driver that has not heart-beaten yet, and writes the history.

Kafka secrets reach the driver through the environment variable
:data:`CLIENT_CONFIG_ENV` (JSON), never through its arguments.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.submit_rules import SubmitAction, decide_submit
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.storage.files import dump_json, is_local, read_json, write_atomic
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation
from airflow_kafka_stream.storage.processes import driver_gone, process_alive

#: Environment variable carrying the Kafka client settings (secrets included) as JSON to a driver.
CLIENT_CONFIG_ENV = "AIRFLOW_KAFKA_STREAM_CLIENT_CONFIG"
LAUNCH_RECORD = ("control", "launched.json")


@dataclass(frozen=True)
class LaunchedDriver:
    """A driver just started: its local process (client mode) or its cluster application id, and its log."""

    pid: int | None
    host: str | None
    log: str
    application_id: str | None = None


@dataclass(frozen=True)
class SubmitResult:
    """What a submit did: ``launched`` a driver, or found one of this version (``already-running``)."""

    action: str
    reason: str
    app_version: str
    submitted_at: str
    pid: int | None = None
    driver_log: str | None = None
    host: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def client_config_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Kafka client settings a submit passed to this driver (empty when none)."""
    from airflow_kafka_stream.storage.files import json_object_from_env

    return json_object_from_env(CLIENT_CONFIG_ENV, "librdkafka settings", environ)


def driver_log_path(home: JobHome, now: datetime) -> str:
    """Where a new driver's output goes: the job home's logs/ when local, else a local temporary folder."""
    name = f"driver-{now:%Y%m%dT%H%M%SZ}.log"
    if is_local(home.fs):
        home.fs.makedirs(home.p("logs"), exist_ok=True)
        return home.p("logs", name)
    folder = os.path.join(tempfile.gettempdir(), "airflow-kafka-stream", home.url.replace("://", "_").replace("/", "_"))
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, name)


def launch_record(home: JobHome) -> dict[str, Any] | None:
    try:
        record = read_json(home.fs, home.p(*LAUNCH_RECORD))
    except (ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


def submission_path(home: JobHome, app_version: str) -> str:
    home.savepoint_url(str(app_version))  # the same rule as a savepoint id: one path segment
    return home.p("submissions", f"{app_version}.json")


def recorded_submission(home: JobHome, app_version: str) -> dict[str, Any]:
    """How ``app_version`` was last submitted (application, arguments, settings; never a secret)."""
    try:
        found = read_json(home.fs, submission_path(home, app_version))
    except (ValueError, UnicodeDecodeError):
        found = None
    if not isinstance(found, dict):
        raise JobStateError(f"job {home.url} has no recorded submission of version {app_version}; submit that "
                            "version with its application and arguments instead", setting="application")
    return found


def submit(home: JobHome, app_version: str, launch: Callable[[str], LaunchedDriver], *, by: str | None = None,
           now: datetime | None = None, max_heartbeat_age: float = 30.0, start_grace_seconds: float = 180.0,
           submission: Mapping[str, Any] | None = None, cause: str | None = None) -> SubmitResult:
    """Start the job's driver (``launch(log_path)``) unless a driver of ``app_version`` runs or starts.

    ``submission`` (application, arguments, settings, no secrets) is recorded under ``submissions/`` so
    the same version can be started again later (a rollback, a watchdog restart). ``cause`` says who
    started it when it was not a person or a DAG's own submit (the watchdog counts its own restarts by it).
    """
    if not app_version or not str(app_version).strip():
        raise InvalidInputError("app_version is empty; give the application version being submitted",
                                setting="app_version")
    now = now or datetime.now(UTC)
    # A first submit makes the job home: there is nothing to require yet.
    with recorded_operation(home, "submit", {"app_version": app_version, "cause": cause}, by=by,
                            existing_home=False) as record:
        status = home.status()
        previous = launch_record(home)
        decision = decide_submit(status=status, running_version=_running_version(home, status),
                                 launch_record=previous, launcher_alive=process_alive((previous or {}).get("pid"), (previous or {}).get("host")),
                                 version=str(app_version), now=now, max_heartbeat_age=max_heartbeat_age,
                                 start_grace_seconds=start_grace_seconds, processes_gone=driver_gone(status))
        record["before"] = {"state": (status or {}).get("state"), "launched": previous}
        if decision.action is SubmitAction.REFUSE:
            raise JobStateError(f"job {home.url}: {decision.reason}")
        if decision.action is SubmitAction.WAIT:
            result = SubmitResult("already-running", decision.reason, str(app_version), now.isoformat())
            record["after"] = result.to_dict()
            return result
        driver = launch(driver_log_path(home, now))
        launched = {"pid": driver.pid, "host": driver.host, "launched_at": now.isoformat(),
                    "app_version": str(app_version), "log": driver.log, "application_id": driver.application_id}
        write_atomic(home.fs, home.p(*LAUNCH_RECORD), dump_json(launched))
        if submission is not None:
            write_atomic(home.fs, submission_path(home, str(app_version)),
                         dump_json({**submission, "app_version": str(app_version), "submitted_at": now.isoformat()}))
        result = SubmitResult("launched", decision.reason, str(app_version), now.isoformat(), driver.pid, driver.log,
                              driver.host)
        record["after"] = result.to_dict()
        return result


def _running_version(home: JobHome, status: Mapping[str, Any] | None) -> str | None:
    version = (status or {}).get("app_version") or home.spec().get("version")
    return None if version is None else str(version)


def log_tail(path: str | None, secrets: list[str] | None = None, max_chars: int = 4000) -> str:
    """The end of a local driver log, secret values masked ('' when there is none)."""
    from airflow_kafka_stream.core.redaction import redact_text

    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as handle:
        handle.seek(max(0, os.path.getsize(path) - max_chars))
        text = handle.read().decode("utf-8", errors="replace")
    return redact_text(text, secrets or [])
