"""Stop a running job after its current micro-batch, optionally taking a savepoint."""

from __future__ import annotations

import logging
import time
from typing import Any

from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.operation import recorded_operation
from airflow_kafka_stream.spark.status import FINAL_STATES
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)



def stop_job(home: JobHome, timeout: float = 300.0, savepoint: bool = False, app_version: str | None = None,
             poll: float = 0.5, by: str | None = None) -> dict[str, Any]:
    """Request a graceful stop, wait for the job to report STOPPED, optionally savepoint.

    Idempotent: a job that is already stopped is reported as such. On timeout the
    request is withdrawn (so the job does not stop later by surprise) and
    JobStateError is raised.
    """
    if not timeout > 0:
        raise InvalidInputError(f"--timeout must be a positive number of seconds, got {timeout}")
    with recorded_operation(home, "stop", {"timeout": timeout, "savepoint": savepoint}, by=by) as record:
        running, status = job_is_running(home)
        record["before"] = _summary(status)
        if running:
            home.request_stop(record["by"])
            log.info("stop requested for %s; waiting up to %ss", home.url, timeout)
            status = _wait_stopped(home, timeout, poll)
        elif status is None:
            raise JobStateError(f"job {home.url} has never reported a status: there is nothing to stop")
        result: dict[str, Any] = {
            "job_home": home.url,
            "was_running": running,
            "state": status.get("state"),
            "batch_id": _batch(status),
            "offsets": _offsets(status),
        }
        if status.get("state") == "FAILED":
            raise JobStateError(f"job {home.url} ended FAILED while stopping: {status.get('error')}")
        if savepoint:
            from airflow_kafka_stream.ops.savepoints import create_locked

            result["savepoint"] = create_locked(home, app_version=app_version)
        record["after"] = result
        return result


def _wait_stopped(home: JobHome, timeout: float, poll: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = home.status() or {}
        if status.get("state") in FINAL_STATES:
            return status
        running, _ = job_is_running(home)
        if not running and status.get("state") not in FINAL_STATES:
            raise JobStateError(
                f"job {home.url} stopped heart-beating in state {status.get('state')} without reporting "
                "STOPPED: it probably died; check its driver log before restoring or resetting"
            )
        time.sleep(poll)
    home.clear_stop_request()
    raise JobStateError(
        f"job {home.url} did not stop within {timeout:.0f}s (state {status.get('state')}); the stop request was "
        "withdrawn. A long batch may still be running: retry with a larger --timeout"
    )


def _batch(status: dict[str, Any]) -> Any:
    return status.get("last_batch_id", status.get("batch_id"))


def _offsets(status: dict[str, Any]) -> Any:
    return status.get("last_offsets", status.get("offsets"))


def _summary(status: dict[str, Any] | None) -> dict[str, Any] | None:
    if status is None:
        return None
    return {"state": status.get("state"), "batch_id": _batch(status), "offsets": _offsets(status)}


def stop_text(result: dict[str, Any]) -> str:
    if result["was_running"]:
        head = f"job {result['job_home']}: stopped (state {result['state']})"
    elif result["state"] in FINAL_STATES:
        head = f"job {result['job_home']}: was not running (state {result['state']})"
    else:
        head = (f"job {result['job_home']}: was not running, but its last status says {result['state']} with a "
                "stale heartbeat: the driver probably died; check its log before restoring or resetting")
    lines = [
        head,
        f"last committed batch: {result['batch_id']}",
        f"offsets: {result['offsets']}",
    ]
    if result.get("savepoint"):
        lines.append(f"savepoint: {result['savepoint'].get('id')}")
    return "\n".join(lines)
