"""A warm standby's record (``<home>/control/standby.json``), judged as pure functions.

A standby is the next version's driver started while the old version still runs: it comes up (JVM,
session, source, its own code), reports ready and waits for the go that an upgrade gives once the old
version has stopped with a savepoint. Its record moves through:

    LAUNCHED (the control plane started the process) -> STARTING (the driver registered and warms up)
    -> READY (it waits for the go) -> TAKING_OVER (go received: it takes the lock and starts its query)
    -> ACTIVE (it is the job's driver; its status is status.json from now on)

or ends FAILED (it could not come up or take over) or ENDED (the control plane ended it, or it gave up
waiting). While LAUNCHED it has no heartbeat yet (a JVM takes seconds): it counts as live while its
process does and the start grace lasts; afterwards its heartbeat decides, as for a job.

Rules of :func:`judge_ready` (what an upgrade waiting for its standby concludes), in order:
1. A record of another standby (other token), or none: waiting while the process lives; its exit
   before registering is a failure (a broken application).
2. FAILED or ENDED: a failure, with the standby's own error.
3. The process exited (known on its host): a failure, whatever its record last said.
4. A heartbeat older than the limit: a failure (the driver hangs or died on another host).
5. READY: ready.
6. Otherwise waiting.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.liveness import Heartbeat, heartbeat_age, is_stale
from airflow_kafka_stream.core.watchdog import Policy


class StandbyState(enum.StrEnum):
    """The states of a standby's record, in the order of the module docstring."""

    LAUNCHED = "LAUNCHED"
    STARTING = "STARTING"
    READY = "READY"
    TAKING_OVER = "TAKING_OVER"
    ACTIVE = "ACTIVE"
    FAILED = "FAILED"
    ENDED = "ENDED"


LIVE_STATES = frozenset({StandbyState.LAUNCHED, StandbyState.STARTING, StandbyState.READY, StandbyState.TAKING_OVER})
FINAL_STATES = frozenset({StandbyState.ACTIVE, StandbyState.FAILED, StandbyState.ENDED})

#: What the go file (``control/standby-go.json``) asks of the standby holding its token.
GO, CANCEL = "go", "cancel"

#: A standby's heartbeat counts as stale after this many seconds at least (or the staleness rule's intervals).
STALE_FLOOR_SECONDS = 10.0

#: Set in a driver's environment (to the token the control plane wrote) to start it as a standby.
STANDBY_ENV = "AIRFLOW_KAFKA_STREAM_STANDBY"


#: job.json's key for the job's wish of a hot standby (``ops.hot_standby``): ``{"policy": {...}}`` or null.
HOT_STANDBY_SPEC_KEY = "hot_standby"


def is_hot(record: Mapping[str, Any] | None) -> bool:
    """Whether a standby record is a hot standby's (an upgrade's standby has no ``hot``)."""
    return bool(record) and isinstance(record.get("hot"), Mapping)


def hot_policy(found: Mapping[str, Any] | None) -> Policy:
    """The restart policy a hot standby judges the driver by, from its record's ``hot`` or the job's wish
    (``{"policy": {...}}``); the watchdog's defaults where none is given."""
    return Policy(**((found or {}).get("policy") or {}))


class Readiness(enum.StrEnum):
    WAITING = "waiting"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class ReadyVerdict:
    outcome: Readiness
    message: str


def _number(value: Any) -> float | None:
    """A JSON number (never a boolean), as a job's status reads one (``core.status_document``)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def heartbeat_of(record: Mapping[str, Any]) -> Heartbeat:
    """The numbers of the record's heartbeat the one staleness rule reads (``core.liveness.Heartbeating``)."""
    return Heartbeat(heartbeat_epoch=_number(record.get("heartbeat_epoch")),
                     heartbeat_interval_seconds=_number(record.get("heartbeat_interval_seconds")),
                     clock_skew_seconds=_number(record.get("clock_skew_seconds")))


def heartbeat_stale(record: Mapping[str, Any], now: datetime) -> bool:
    """A registered standby whose heartbeat is missing or stale by the one rule (``core.liveness``), with a
    floor of :data:`STALE_FLOOR_SECONDS`."""
    return is_stale(heartbeat_of(record), STALE_FLOOR_SECONDS, now)


def _launched_at(record: Mapping[str, Any]) -> datetime | None:
    text = record.get("launched_at")
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def is_live(record: Mapping[str, Any] | None, process_alive: bool | None, now: datetime,
            start_grace_seconds: float = 600.0) -> bool:
    """Whether ``record`` belongs to a standby that still runs (a second one must then be refused).

    ``process_alive``: whether the record's pid lives (None: another host, cannot tell).
    """
    if not record or record.get("state") not in LIVE_STATES or process_alive is False:
        return False
    if record.get("state") == StandbyState.LAUNCHED:
        launched = _launched_at(record)
        return launched is not None and (now - launched).total_seconds() <= start_grace_seconds
    return not heartbeat_stale(record, now)


def describe(record: Mapping[str, Any]) -> str:
    """One line naming a standby for refusals and logs."""
    return (f"standby of version {record.get('version')} (state {record.get('state')}, pid {record.get('pid')} on "
            f"{record.get('host')}, since {record.get('launched_at') or record.get('registered_at')})")


def judge_ready(record: Mapping[str, Any] | None, token: str, process_alive: bool | None,
                now: datetime) -> ReadyVerdict:
    """Apply the rules of the module docstring to one read of the standby's record."""
    # 1. Not registered yet (or the record is another standby's).
    if not record or record.get("token") != token:
        if process_alive is False:
            return ReadyVerdict(Readiness.FAILED, "the standby's process exited before it registered (the "
                                                  "application failed to start; see its log)")
        return ReadyVerdict(Readiness.WAITING, "the standby's driver is starting")
    state = record.get("state")
    # 2. It said it failed, or it was ended.
    if state in (StandbyState.FAILED, StandbyState.ENDED):
        return ReadyVerdict(Readiness.FAILED, f"the standby is {state}: {record.get('error') or 'no reason given'}")
    # 3. Its process is gone.
    if process_alive is False:
        return ReadyVerdict(Readiness.FAILED, f"the standby's process exited in state {state} (see its log)")
    # 4. It stopped heart-beating.
    if state != StandbyState.LAUNCHED and heartbeat_stale(record, now):
        age = heartbeat_age(heartbeat_of(record), now)
        return ReadyVerdict(Readiness.FAILED, f"the standby stopped heart-beating in state {state} "
                                              f"({'no heartbeat' if age is None else f'last {age:.0f}s ago'})")
    # 5. Ready.
    if state == StandbyState.READY:
        return ReadyVerdict(Readiness.READY, f"the standby is READY (pid {record.get('pid')} on {record.get('host')})")
    # 6. Still coming up.
    return ReadyVerdict(Readiness.WAITING, f"the standby is {state}")
