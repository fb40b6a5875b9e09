"""Judge a job's status document against what a waiting task expects, as a pure function.

The running job rewrites ``status.json`` every few seconds (see
``storage/status.py``). Sensors and triggers poll it; this module decides, from
one status read and the clock passed in, whether the wait is over and how it
ended. No I/O, so the rules are tested as a table.

Rules, checked in order; the first that applies decides:
1. No status, or one left by an earlier run (started before ``newer_than``):
   keep waiting, the driver has not reported yet.
2. FAILED: the job failed; the wait fails with the job's error (unless FAILED
   is a target state).
3. A target state reached, with at least ``min_batches`` batches committed in
   this run when the target is RUNNING: the wait succeeds.
4. STOPPED while waiting for another state: the job ended; the wait fails.
5. An active state (STARTING, RUNNING, DRAINING) whose driver is gone by the one
   liveness rule (``core.liveness``: its processes are gone on this host, or its
   heartbeat is older than ``max_heartbeat_age``): the wait fails.
6. Otherwise keep waiting.

Times in a status come from the driver's clock and are compared with the
reader's: on a cluster those are different hosts. Every comparison allows the
job's declared clock skew (``clock_skew_seconds`` in the status, else
:data:`DEFAULT_CLOCK_SKEW_SECONDS`): a heartbeat counts as stale only when it is
older than the limit plus the skew, and a run counts as newer than a submit when
it started no earlier than the submit minus the skew.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from airflow_kafka_stream.core.job_state import ALL_STATES, LIVE_STATES, JobState, state_names
from airflow_kafka_stream.core.liveness import (  # noqa: F401 - the heartbeat half of the rule, named here too
    DEFAULT_CLOCK_SKEW_SECONDS,
    clock_skew,
    heartbeat_age,
    heartbeat_limit,
    is_stale,
    liveness,
    shown_state,
)
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.values import seconds


class WaitStatus(enum.StrEnum):
    """Where a wait stands: every look, trigger event and sensor reads one of these (``event["status"]``)."""

    WAITING = "waiting"
    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"  # the wait gave up: what it waited for did not happen in time
    ERROR = "error"  # a look could not be taken (storage or a broker unreachable): the message says why


@dataclass(frozen=True)
class Verdict:
    """What one look at the status says: keep waiting, or done (succeeded or failed) and why."""

    outcome: WaitStatus
    message: str

    @property
    def done(self) -> bool:
        return self.outcome is not WaitStatus.WAITING


@dataclass(frozen=True)
class WatchSpec:
    """What a waiting task expects of the job."""

    target_states: frozenset[str]
    min_batches: int = 0
    newer_than: datetime | None = None
    max_heartbeat_age: float = 30.0

    @classmethod
    def of(cls, target_states: Collection[str], min_batches: int = 0, newer_than: datetime | None = None,
           max_heartbeat_age: float = 30.0) -> WatchSpec:
        """Validate and build; raises ValueError naming the bad argument."""
        states = frozenset(s.upper() for s in target_states)
        unknown = sorted(states - ALL_STATES)
        if not states or unknown:
            raise ValueError(
                f"target_states must be a non-empty subset of {state_names(ALL_STATES)}, got {sorted(target_states)}"
            )
        if isinstance(min_batches, bool) or not isinstance(min_batches, int) or min_batches < 0:
            raise ValueError(f"min_batches must be a whole number >= 0, got {min_batches!r}")
        if newer_than is not None and newer_than.tzinfo is None:
            raise ValueError("newer_than must carry a timezone")
        seconds(max_heartbeat_age, "max_heartbeat_age")
        return cls(frozenset(JobState(s) for s in states), min_batches, newer_than, float(max_heartbeat_age))


def summary(status: StatusDocument | None, now: datetime, processes_gone: bool | None = None,
            gave_up: str | None = None) -> dict[str, Any]:
    """The few status fields a task log or XCom shows (no secrets are ever in a status), as the driver wrote them.

    ``state`` is the one shown state (``core.liveness.shown_state``: DEAD for a driver gone without saying so,
    GAVE_UP once recovery gave up); ``recorded_state`` is what the driver wrote. ``processes_gone`` and
    ``gave_up`` as the caller observed them (see ``core.liveness``).
    """
    if status is None:
        return {"state": None}
    shown = shown_state(status, liveness(status, now=now, processes_gone=processes_gone), gave_up)
    written = status.to_dict()  # the values as written: XCom and logs show what the driver wrote
    return {
        "state": shown.state,
        "recorded_state": status.state_text,
        "state_reason": shown.reason,
        "application_id": written.get("application_id"),
        "generation": written.get("generation"),
        "last_batch_id": written.get("last_batch_id"),
        "last_offsets": written.get("last_offsets"),
        "batches_this_run": written.get("batches_this_run"),
        "heartbeat_age_seconds": _rounded(heartbeat_age(status, now)),
        "started_at": written.get("started_at"),
        "error": written.get("error"),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# 1. Nothing from this run yet.
def not_reported_yet(status: StatusDocument | None, spec: WatchSpec) -> Verdict | None:
    if status is None:
        return Verdict(WaitStatus.WAITING, "the job has not reported a status yet")
    started = status.started_at
    if spec.newer_than is not None and (
            started is None or started < spec.newer_than - timedelta(seconds=clock_skew(status))):
        return Verdict(WaitStatus.WAITING, f"the status is from an earlier run (started {status.started_text})")
    return None


# 2. The job failed.
def job_failed(status: StatusDocument, spec: WatchSpec) -> Verdict | None:
    if status.state is JobState.FAILED and JobState.FAILED not in spec.target_states:
        return Verdict(WaitStatus.FAILED, f"the job FAILED: {status.error or 'no error recorded'}")
    return None


# 3. A target state reached (with enough batches when waiting for RUNNING).
def target_reached(status: StatusDocument, spec: WatchSpec, now: datetime,
                   processes_gone: bool | None = None) -> Verdict | None:
    state = status.state
    if state not in spec.target_states:
        return None
    if state in LIVE_STATES and _lost(status, spec, now, processes_gone):
        return None  # rule 5 decides
    if state is JobState.RUNNING and spec.min_batches:
        done = status.batches_this_run or 0
        if done < spec.min_batches:
            return None
        return Verdict(WaitStatus.SUCCESS, f"the job is RUNNING and committed {done} batch(es) in this run "
                                        f"(last batch {status.last_batch_id})")
    return Verdict(WaitStatus.SUCCESS, f"the job is {state} (last committed batch {status.last_batch_id})")


# 4. The job ended while another state was awaited.
def ended_elsewhere(status: StatusDocument, spec: WatchSpec) -> Verdict | None:
    if status.state is JobState.STOPPED and JobState.STOPPED not in spec.target_states:
        return Verdict(WaitStatus.FAILED, f"the job STOPPED (last committed batch {status.last_batch_id}) "
                                       f"while {'/'.join(sorted(spec.target_states))} was awaited")
    return None


# 5. The driver is gone (core.liveness: its processes are gone on this host, or its heartbeat is stale).
def driver_gone(status: StatusDocument, spec: WatchSpec, now: datetime,
                processes_gone: bool | None = None) -> Verdict | None:
    if status.state in LIVE_STATES and _lost(status, spec, now, processes_gone):
        age = heartbeat_age(status, now)
        gone = "its process and JVM are gone" if processes_gone else (
            f"its heartbeat is {'missing' if age is None else f'{age:.0f}s old'}")
        return Verdict(WaitStatus.FAILED, f"the job's last status says {status.state_text} but {gone}: the driver "
                                       "died without reporting; read its log in the job home")
    return None


def _lost(status: StatusDocument, spec: WatchSpec, now: datetime, processes_gone: bool | None) -> bool:
    return liveness(status, now=now, processes_gone=processes_gone, max_heartbeat_age=spec.max_heartbeat_age).lost


def judge(status: StatusDocument | None, spec: WatchSpec, now: datetime,
          processes_gone: bool | None = None) -> Verdict:
    """Apply the rules in order to one status read at ``now``; ``processes_gone`` as in ``core.liveness``."""
    early = not_reported_yet(status, spec)
    if early is not None:
        return early
    assert status is not None
    for verdict in (job_failed(status, spec), target_reached(status, spec, now, processes_gone),
                    ended_elsewhere(status, spec), driver_gone(status, spec, now, processes_gone)):
        if verdict is not None:
            return verdict
    progress = f", {status.batches_this_run or 0} batch(es) this run" if status.state is JobState.RUNNING else ""
    return Verdict(WaitStatus.WAITING, f"the job is {status.state_text}{progress}")
