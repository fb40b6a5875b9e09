"""Stop a running job after its current micro-batch, optionally taking a savepoint.

The stop request is revocable. When the job does not stop within the timeout:

* ``on_timeout="withdraw"`` (default): the request is removed, the job leaves DRAINING
  and keeps running as before; the refusal says so and nothing is left changed;
* ``on_timeout="kill"``: the request is turned into a kill, the job stops its query at
  once (Spark cancels the running batch and re-runs it on restart) and ends STOPPED; a
  savepoint, if asked, is of the last committed batch.

Idempotent: a job that already ended (STOPPED or FAILED) is reported as it is.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from airflow_kafka_stream.errors import InvalidInputError, JobStateError, OperationIncompleteError
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.results import SavepointInfo, StopRequested, StopResult
from airflow_kafka_stream.storage.jobhome import STOP_MODE_KILL, JobHome
from airflow_kafka_stream.storage.operation import recorded_operation
from airflow_kafka_stream.storage.status import FAILED, FINAL_STATES

log = logging.getLogger(__name__)

ON_TIMEOUT = ("withdraw", "kill")

#: After withdrawing, how long to wait for the job to report that it runs again (it looks every half second).
ACKNOWLEDGE_SECONDS = 15.0


def stop_job(home: JobHome, timeout: float = 300.0, savepoint: bool = False, app_version: str | None = None,
             poll: float = 0.5, by: str | None = None, on_timeout: str = "withdraw",
             kill_timeout: float = 60.0) -> StopResult:
    """Request a graceful stop, wait for the job to report a final state, optionally savepoint.

    Raises JobStateError when the request was withdrawn (the job keeps running) and
    OperationIncompleteError when the job failed while stopping or a kill got no answer.
    """
    if not timeout > 0:
        raise InvalidInputError(f"timeout must be a positive number of seconds, got {timeout}", setting="timeout")
    if on_timeout not in ON_TIMEOUT:
        raise InvalidInputError(f"on_timeout must be one of {', '.join(ON_TIMEOUT)}, got {on_timeout!r}",
                                setting="on_timeout")
    args = {"timeout": timeout, "savepoint": savepoint, "on_timeout": on_timeout}
    with recorded_operation(home, "stop", args, by=by) as record:
        running, status = job_is_running(home)
        record["before"] = _summary(status)
        killed = False
        if running:
            home.request_stop(record["by"])
            log.info("stop requested for %s; waiting up to %ss", home.url, timeout)
            status = _wait_final(home, timeout, poll)
            if status is None and on_timeout == "kill":
                status, killed = _kill(home, record["by"], kill_timeout, poll), True
            elif status is None:
                status = _withdraw(home, timeout, poll)
        elif status is None:
            raise JobStateError(f"job {home.url} has never reported a status: there is nothing to stop")
        result = _conclude(home, status, running, killed, savepoint, app_version, record)
        return result


def _conclude(home: JobHome, status: dict[str, Any], was_running: bool, killed: bool, savepoint: bool,
              app_version: str | None, record: dict[str, Any]) -> StopResult:
    """The stop's result once the job's state is final: refused when it failed stopping, else the savepoint."""
    result = StopResult(job_home=home.url, was_running=was_running, killed=killed, state=status.get("state"),
                        batch_id=_batch(status), offsets=_offsets(status), note=status.get("note"),
                        error=status.get("error"))
    if was_running and status.get("state") == FAILED:
        record["after"] = result.to_dict()
        raise OperationIncompleteError(
            f"job {home.url} failed while stopping: {status.get('error')}. It no longer runs; its last "
            f"committed batch is {result.batch_id}. Fix the cause and start it again (the failed batch "
            "re-runs)" + ("; no savepoint was taken" if savepoint else "")
        )
    if savepoint:
        result = replace(result, savepoint=_savepoint(home, status, app_version, after_kill=killed))
    record["after"] = result.to_dict()
    return result


# -- the same stop in phases, for a caller that waits elsewhere (a deferred Airflow task) ------------------------

def request_stop(home: JobHome, by: str | None = None) -> StopRequested:
    """Ask a running job to drain and stop; returns whether it was running. The wait happens elsewhere."""
    with recorded_operation(home, "stop-request", {}, by=by) as record:
        running, status = job_is_running(home)
        record["before"] = _summary(status)
        if running:
            home.request_stop(record["by"])
        elif status is None:
            raise JobStateError(f"job {home.url} has never reported a status: there is nothing to stop")
        record["after"] = {"requested": running}
        return StopRequested(running, (status or {}).get("state"))


def complete_stop(home: JobHome, was_running: bool, savepoint: bool = False, app_version: str | None = None,
                  killed: bool = False, by: str | None = None) -> StopResult:
    """Once the job reported a final state: the stop's result and, if asked, its savepoint."""
    args = {"savepoint": savepoint, "killed": killed, "phased": True}
    with recorded_operation(home, "stop", args, by=by) as record:
        status = home.status() or {}
        record["before"] = _summary(status)
        if status.get("state") not in FINAL_STATES:
            raise JobStateError(f"job {home.url} has not stopped (state {status.get('state')}); nothing was saved")
        return _conclude(home, status, was_running, killed, savepoint, app_version, record)


def withdraw_stop(home: JobHome, waited: float, by: str | None = None, poll: float = 0.5) -> dict[str, Any]:
    """A stop that timed out: withdraw the request. Raises JobStateError saying the job keeps running, or
    returns the final status when it stopped as the request was withdrawn."""
    with recorded_operation(home, "stop-withdraw", {"waited": waited}, by=by) as record:
        status = _withdraw(home, waited, poll)
        record["after"] = _summary(status)
        return status


def request_kill(home: JobHome, by: str | None = None) -> None:
    """A stop that timed out, told to stop for good: the job stops its query at once (its batch re-runs later)."""
    with recorded_operation(home, "stop-kill", {}, by=by) as record:
        home.request_stop(record["by"], mode=STOP_MODE_KILL)
        log.warning("job %s did not drain in time: asked it to stop at once, cancelling its running batch", home.url)
        record["after"] = {"requested": "kill"}


def kill_unanswered(home: JobHome, kill_timeout: float) -> OperationIncompleteError:
    """The error of a kill request the driver did not answer in time."""
    last = home.status() or {}
    return OperationIncompleteError(
        f"job {home.url} did not answer the kill request within {kill_timeout:.0f}s (state {last.get('state')}). "
        f"The request stays in control/stop, so it stops at once if it recovers. Kill the driver by hand "
        f"(application {last.get('application_id') or '?'}, pid {last.get('pid')} on {last.get('host')}); "
        "the running batch re-runs on restart"
    )


def _wait_final(home: JobHome, timeout: float, poll: float) -> dict[str, Any] | None:
    """The job's status once it is final, or None when it is still draining at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        status = home.status() or {}
        if status.get("state") in FINAL_STATES:
            return status
        running, _ = job_is_running(home)
        if not running:
            raise OperationIncompleteError(
                f"job {home.url} stopped heart-beating in state {status.get('state')} without reporting "
                "STOPPED: it probably died. Check its driver log before restoring or resetting; the stop "
                "request stays and is cleared by the next start"
            )
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def _withdraw(home: JobHome, timeout: float, poll: float) -> dict[str, Any]:
    """Remove the request and wait for the job to run again; raise saying it keeps running."""
    home.clear_stop_request()
    deadline = time.monotonic() + ACKNOWLEDGE_SECONDS
    status = home.status() or {}
    while status.get("state") not in FINAL_STATES and status.get("state") != "RUNNING":
        if time.monotonic() >= deadline:
            break
        time.sleep(poll)
        status = home.status() or {}
    state = status.get("state")
    if state in FINAL_STATES:
        return status  # the drain ended as the request was withdrawn: it stopped after all
    ack = ("it reports RUNNING again" if state == "RUNNING" else
           f"it still reported {state} {ACKNOWLEDGE_SECONDS:.0f}s later and returns to RUNNING when it next "
           "looks at the request")
    raise JobStateError(
        f"job {home.url} did not stop within {timeout:.0f}s: the running batch has not finished. The stop "
        f"request was withdrawn and the job keeps running ({ack}; last committed batch {_batch(status)}). "
        "Retry with a larger timeout, or with on_timeout=kill to cancel the running batch",
        setting=("timeout", "on_timeout")
    )


def _kill(home: JobHome, by: str, kill_timeout: float, poll: float) -> dict[str, Any]:
    """Turn the request into a kill and wait for the job to report it stopped."""
    home.request_stop(by, mode=STOP_MODE_KILL)
    log.warning("job %s did not drain in time: asked it to stop at once, cancelling its running batch", home.url)
    status = _wait_final(home, kill_timeout, poll)
    if status is not None:
        return status
    raise kill_unanswered(home, kill_timeout)


def _savepoint(home: JobHome, status: dict[str, Any], app_version: str | None, after_kill: bool) -> SavepointInfo:
    from airflow_kafka_stream.checkpoint.reader import read_position
    from airflow_kafka_stream.ops.savepoints import create_locked

    position = read_position(home.checkpoint_url(), home.storage_options)
    if position.in_flight_batch_id is not None and not after_kill:
        # A FAILED job (or one stopped at once earlier) left its last batch half done.
        raise JobStateError(
            f"job {home.url} is {status.get('state')} with batch {position.in_flight_batch_id} in flight (started, "
            "never committed): a savepoint must be of a consistent checkpoint, so none was taken and nothing "
            "changed. Start the job again (it re-runs that batch), then stop it with a savepoint"
        )
    made = create_locked(home, app_version=app_version, exclude_in_flight=after_kill)
    if after_kill:
        made = replace(made, note=f"of batch {made.batch_id}, the last committed"
                       + (f"; batch {position.in_flight_batch_id} was cancelled and is not in it"
                          if position.in_flight_batch_id is not None else ""))
    return made


def _batch(status: dict[str, Any]) -> Any:
    return status.get("last_batch_id", status.get("batch_id"))


def _offsets(status: dict[str, Any]) -> Any:
    return status.get("last_offsets", status.get("offsets"))


def _summary(status: dict[str, Any] | None) -> dict[str, Any] | None:
    if status is None:
        return None
    return {"state": status.get("state"), "batch_id": _batch(status), "offsets": _offsets(status)}
