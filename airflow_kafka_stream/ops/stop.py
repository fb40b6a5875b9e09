"""Stop a running job after its current micro-batch, optionally taking a savepoint: one phased machine.

*request* (:func:`request_stop`) → *look* (:func:`look_stopped`, repeated) → *conclude* (:func:`conclude`),
which returns the :class:`~airflow_kafka_stream.ops.results.StopResult` or the next phase. The command line
runs the loop in :func:`stop_job`; the Airflow operator runs the same steps around its in-slot wait and its
trigger. Each step takes the job lock briefly and writes its own history record (``stop-request``, then
``stop``, and ``stop-kill`` or ``stop-withdraw`` when the drain timed out), whoever drives it.

The stop request is revocable. When the job does not stop within the timeout:

* ``on_timeout=withdraw`` (default): the request is removed, the job leaves DRAINING and keeps running as
  before; the refusal says so and nothing is left changed;
* ``on_timeout=kill``: the request is turned into a kill, the job stops its query at once (Spark cancels the
  running batch and re-runs it on restart) and ends STOPPED; a savepoint, if asked, is of the last
  committed batch.

Idempotent: a job that already ended (STOPPED or WaitStatus.FAILED) is reported as it is.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.job_state import FINAL_STATES, JobState
from airflow_kafka_stream.core.job_watch import WaitStatus, WatchSpec
from airflow_kafka_stream.core.status_document import StatusDocument, written_state
from airflow_kafka_stream.core.values import seconds
from airflow_kafka_stream.errors import InvalidInputError, JobStateError, OperationIncompleteError
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.results import SavepointInfo, StopRequested, StopResult
from airflow_kafka_stream.ops.savepoints import create_locked, pin
from airflow_kafka_stream.ops.watch import look_job, wait
from airflow_kafka_stream.storage.jobhome import STOP_MODE_KILL, JobHome
from airflow_kafka_stream.storage.operation import recorded_operation

log = logging.getLogger(__name__)


class OnTimeout(enum.StrEnum):
    """What a stop does when the job has not drained in time."""

    WITHDRAW = "withdraw"
    KILL = "kill"


class StopPhase(enum.StrEnum):
    """The wait a stop is in: for the drain, or for the answer to a kill."""

    DRAIN = "drain"
    KILL = "kill"


ON_TIMEOUT = tuple(choice.value for choice in OnTimeout)

#: After withdrawing, how long to wait for the job to report that it runs again (it looks every half second).
ACKNOWLEDGE_SECONDS = 15.0


@dataclass(frozen=True)
class StopOptions:
    """How a stop behaves; refused with the setting named when a value is not allowed."""

    timeout: float = 300.0
    savepoint: bool = False
    app_version: str | None = None
    on_timeout: OnTimeout = OnTimeout.WITHDRAW
    kill_timeout: float = 60.0
    pin_reason: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "on_timeout", OnTimeout(self.on_timeout))
        except ValueError:
            raise InvalidInputError(f"on_timeout must be one of {', '.join(ON_TIMEOUT)}, got {self.on_timeout!r}",
                                    setting="on_timeout") from None
        for name in ("timeout", "kill_timeout"):
            object.__setattr__(self, name, seconds(getattr(self, name), name))

    def timeout_of(self, phase: StopPhase) -> float:
        return self.kill_timeout if phase is StopPhase.KILL else self.timeout


def stop_job(home: JobHome, timeout: float = 300.0, savepoint: bool = False, app_version: str | None = None,
             poll: float = 0.5, by: str | None = None, on_timeout: str = "withdraw",
             kill_timeout: float = 60.0, pin_reason: str | None = None) -> StopResult:
    """The whole stop in this process: request, look every ``poll`` seconds, conclude.

    Raises JobStateError when the request was withdrawn (the job keeps running) and
    OperationIncompleteError when the job failed while stopping or a kill got no answer.
    """
    options = StopOptions(timeout, savepoint, app_version, on_timeout, kill_timeout, pin_reason)
    asked = request_stop(home, by=by)
    if not asked.was_running:
        return complete_stop(home, False, options, by=by)
    log.info("stop requested for %s; waiting up to %ss", home.url, options.timeout)
    phase = StopPhase.DRAIN
    while True:
        event = wait(lambda: look_stopped(home), options.timeout_of(phase), poll)
        step = conclude(home, event, phase, options, by=by, poll=poll)
        if isinstance(step, StopResult):
            return step
        phase = step


def look_stopped(home: JobHome) -> dict[str, Any]:
    """One look: ``success`` once the job reports a final state, ``failed`` when its driver died draining."""
    return look_job(home, WatchSpec.of(sorted(FINAL_STATES)))


def request_stop(home: JobHome, by: str | None = None) -> StopRequested:
    """Ask a running job to drain and stop; returns whether it was running. The wait happens elsewhere.

    A job that is down without having stopped (its driver died, or recovery gave up on it) gets the request too:
    stopping it is the decision that it stays down, so the watchdog, the supervisor and a hot standby, which leave
    a job with a stop request alone, do not start it again (on a give-up this is its acknowledgement). The next
    start of the job clears the request."""
    with recorded_operation(home, "stop-request", {}, by=by) as record:
        running, status = job_is_running(home)
        record["before"] = _summary(StatusDocument.parse(status), status is not None)
        if status is None:
            raise JobStateError(f"job {home.url} has never reported a status: there is nothing to stop")
        kept_down = not running and written_state(status) != JobState.STOPPED.value
        if running or kept_down:
            home.request_stop(record["by"])
        record["after"] = {"requested": running, "kept_stopped": kept_down}
        return StopRequested(running, written_state(status))


def conclude(home: JobHome, event: dict[str, Any], phase: StopPhase, options: StopOptions, *,
             by: str | None = None, poll: float = 0.5) -> StopResult | StopPhase:
    """Decide what a finished wait means: the stop's result, or :attr:`StopPhase.KILL` to wait for a kill.

    Raises JobStateError when a timed-out drain was withdrawn (the job keeps running) and
    OperationIncompleteError when a kill went unanswered or the driver died without reporting a stop.
    """
    phase = StopPhase(phase)
    status = event.get("status")
    if status == WaitStatus.SUCCESS:
        return complete_stop(home, True, options, killed=phase is StopPhase.KILL, by=by)
    if status == WaitStatus.TIMEOUT and phase is StopPhase.DRAIN:
        if options.on_timeout is OnTimeout.KILL:
            request_kill(home, by=by)
            return StopPhase.KILL
        withdraw_stop(home, options.timeout, by=by, poll=poll)  # raises unless the job stopped meanwhile
        return complete_stop(home, True, options, by=by)
    if status == WaitStatus.TIMEOUT:
        raise kill_unanswered(home, options.kill_timeout)
    raise OperationIncompleteError(
        f"job {home.url} did not report a stop: {event.get('message')}. It probably died; the stop request "
        "stays and is cleared by the next start. Check its driver log before restoring or resetting")


def complete_stop(home: JobHome, was_running: bool, options: StopOptions | None = None, killed: bool = False,
                  by: str | None = None) -> StopResult:
    """Once the job reported a final state: the stop's result and, if asked, its savepoint (pinned with
    ``pin_reason``: an upgrade keeps the savepoint it may roll back to out of housekeeping)."""
    options = options or StopOptions()
    args = {"savepoint": options.savepoint, "killed": killed, "on_timeout": options.on_timeout.value}
    with recorded_operation(home, "stop", args, by=by) as record:
        status = home.status_document() or NO_STATUS
        record["before"] = _summary(status)
        if not status.is_final and (was_running or options.savepoint):
            raise JobStateError(f"job {home.url} has not stopped (state {status.state_text}); nothing was saved")
        # Not running and not final: its driver died without a final status (e.g. while STARTING). Nothing to stop
        # (a rollback goes on to restore); a savepoint of it was refused above.
        result = StopResult(job_home=home.url, was_running=was_running, killed=killed, state=status.state_text,
                            batch_id=status.last_batch_id, offsets=_offsets(status), note=status.note,
                            error=status.error, app_version=home.spec().get("version"))
        if was_running and status.state is JobState.FAILED:
            record["after"] = result.to_dict()
            raise OperationIncompleteError(
                f"job {home.url} failed while stopping: {status.error}. It no longer runs; its last "
                f"committed batch is {result.batch_id}. Fix the cause and start it again (the failed batch "
                "re-runs)" + ("; no savepoint was taken" if options.savepoint else ""))
        if options.savepoint:
            result = replace(result, savepoint=_savepoint(home, status, options.app_version, after_kill=killed))
        record["after"] = result.to_dict()
    if result.savepoint is not None and options.pin_reason:
        pin(home, result.savepoint.id, options.pin_reason, by=by)
    return result


def withdraw_stop(home: JobHome, waited: float, by: str | None = None, poll: float = 0.5) -> dict[str, Any]:
    """A stop that timed out: withdraw the request. Raises JobStateError saying the job keeps running, or
    returns the final status when it stopped as the request was withdrawn."""
    with recorded_operation(home, "stop-withdraw", {"waited": waited}, by=by) as record:
        status = _withdraw(home, waited, poll)
        record["after"] = _summary(status)
        return status.to_dict()


def request_kill(home: JobHome, by: str | None = None) -> None:
    """A stop that timed out, told to stop for good: the job stops its query at once (its batch re-runs later)."""
    with recorded_operation(home, "stop-kill", {}, by=by) as record:
        home.request_stop(record["by"], mode=STOP_MODE_KILL)
        log.warning("job %s did not drain in time: asked it to stop at once, cancelling its running batch", home.url)
        record["after"] = {"requested": "kill"}


def kill_unanswered(home: JobHome, kill_timeout: float) -> OperationIncompleteError:
    """The error of a kill request the driver did not answer in time."""
    last = home.status_document() or NO_STATUS
    return OperationIncompleteError(
        f"job {home.url} did not answer the kill request within {kill_timeout:.0f}s (state {last.state_text}). "
        f"The request stays in control/stop, so it stops at once if it recovers. Kill the driver by hand "
        f"(application {last.application_id or '?'}, pid {last.pid} on {last.host}); "
        "the running batch re-runs on restart"
    )


def _withdraw(home: JobHome, timeout: float, poll: float) -> StatusDocument:
    """Remove the request and wait for the job to run again; raise saying it keeps running."""
    home.clear_stop_request()
    deadline = time.monotonic() + ACKNOWLEDGE_SECONDS
    status = home.status_document() or NO_STATUS
    while not status.is_final and status.state is not JobState.RUNNING:
        if time.monotonic() >= deadline:
            break
        time.sleep(poll)
        status = home.status_document() or NO_STATUS
    if status.is_final:
        return status  # the drain ended as the request was withdrawn: it stopped after all
    ack = ("it reports RUNNING again" if status.state is JobState.RUNNING else
           f"it still reported {status.state_text} {ACKNOWLEDGE_SECONDS:.0f}s later and returns to RUNNING when it "
           "next looks at the request")
    raise JobStateError(
        f"job {home.url} did not stop within {timeout:.0f}s: the running batch has not finished. The stop "
        f"request was withdrawn and the job keeps running ({ack}; last committed batch {status.last_batch_id}). "
        "Retry with a larger timeout, or with on_timeout=kill to cancel the running batch",
        setting=("timeout", "on_timeout")
    )


def _savepoint(home: JobHome, status: StatusDocument, app_version: str | None, after_kill: bool) -> SavepointInfo:
    position = read_position(home.checkpoint_url(), home.storage_options)
    if position.in_flight_batch_id is not None and not after_kill:
        # A WaitStatus.FAILED job (or one stopped at once earlier) left its last batch half done.
        raise JobStateError(
            f"job {home.url} is {status.state_text} with batch {position.in_flight_batch_id} in flight (started, "
            "never committed): a savepoint must be of a consistent checkpoint, so none was taken and nothing "
            "changed. Start the job again (it re-runs that batch), then stop it with a savepoint"
        )
    made = create_locked(home, app_version=app_version, exclude_in_flight=after_kill)
    if after_kill:
        made = replace(made, note=f"of batch {made.batch_id}, the last committed"
                       + (f"; batch {position.in_flight_batch_id} was cancelled and is not in it"
                          if position.in_flight_batch_id is not None else ""))
    return made


#: What a stop reads when the job home holds no status: no state, no batch.
NO_STATUS = StatusDocument(state=None)


def _offsets(status: StatusDocument) -> Any:
    """The last committed offsets; ``offsets`` as runtimes before ``last_offsets`` wrote them (the document
    does not read that key: only a stop's result and records ever showed it)."""
    return status.last_offsets if status.last_offsets is not None else status.raw.get("offsets")


def _summary(status: StatusDocument | None, read: bool = True) -> dict[str, Any] | None:
    """The ``before``/``after`` of a stop's history records; None when no status was read at all."""
    if not read:
        return None
    status = status or NO_STATUS
    return {"state": status.state_text, "batch_id": status.last_batch_id, "offsets": _offsets(status),
            "stopped_at": status.stopped_at.isoformat() if status.stopped_at else None}
