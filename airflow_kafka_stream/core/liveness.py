"""Is a job's driver alive? The one rule every reader of a status applies, as a pure function.

``status``, the job page, the guards of reset/restore/repair/stop, a submit, the
watchdog, sensors, triggers and a starting driver all ask it; none decides on
its own. The driver writes its status (state, heartbeat, pids, host); the only
thing a reader can add is whether the driver's processes still exist, and that
only on the host they ran on: the caller observes it (``storage.processes``)
and passes it in as ``processes_gone``, with ``now``. The status is the parsed
``core.status_document.StatusDocument`` (the caller parses what it read). Rules,
in order; the first that applies decides:

1. No status: the job never reported; not alive.
2. A final state (STOPPED, FAILED) or an unknown one: not alive; it ended and said so.
3. The driver ran on this host and its Python process and its JVM are both gone:
   dead at once, however fresh its last heartbeat (a ``kill -9`` leaves one that
   looks fresh for up to the heartbeat limit).
4. The heartbeat is missing or older than the limit (``max_heartbeat_age``, or
   four of a slow-beating job's intervals, plus the job's declared clock skew):
   dead; it died without saying so. A driver on another host is judged by this
   rule alone, since its pids mean nothing here.
5. Otherwise alive.

What a front end shows (``status``, the job page, XCom) is one state derived from
these rules, :func:`shown_state`: the recorded state while the driver lives or
after it ended and said so; DEAD for an active state the driver can no longer be
in (a watchdog or supervisor may still restart it); GAVE_UP once recovery gave up
on this run (its restart limit), with the reason. The recorded state stays
available beside it (``recorded_state``).

Times in a status come from the driver's clock; a reader on another host allows
the skew the job declares (``clock_skew_seconds``), so a heartbeat from the
future counts as fresh.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from airflow_kafka_stream.core.job_state import LIVE_STATES
from airflow_kafka_stream.core.status_document import StatusDocument

#: How far apart the driver's and a reader's clocks may be when a job does not declare it: none, as on one
#: host; a job whose driver and readers run on different hosts declares it (StreamConfig.clock_skew_seconds).
DEFAULT_CLOCK_SKEW_SECONDS = 0.0

#: A heartbeat older than this (seconds) means the driver is gone, unless the job beats slower.
DEFAULT_MAX_HEARTBEAT_AGE = 30.0

#: A heartbeat older than this many of the writer's own intervals means it is gone, whatever the floor: the one
#: staleness rule, for a job's driver and a standby alike (:func:`heartbeat_limit`).
STALE_AFTER_INTERVALS = 4


class Life(enum.StrEnum):
    NO_STATUS = "no-status"
    ENDED = "ended"
    GONE = "gone"
    STALE = "stale"
    ALIVE = "alive"


@dataclass(frozen=True)
class Liveness:
    """What the rule found, why, and the heartbeat's age (seconds, None without a usable heartbeat)."""

    life: Life
    reason: str
    heartbeat_age: float | None = None

    @property
    def alive(self) -> bool:
        return self.life is Life.ALIVE

    @property
    def lost(self) -> bool:
        """An active state the driver can no longer be in: it died without saying so."""
        return self.life in (Life.GONE, Life.STALE)


class Heartbeating(Protocol):
    """The few numbers of a heartbeat the one staleness rule reads, whoever writes it: a job's driver
    (:class:`~airflow_kafka_stream.core.status_document.StatusDocument`) or a standby (``core.standby``'s
    :class:`Heartbeat` of its record). Each is a JSON number as written, None when absent or not a number."""

    @property
    def heartbeat_epoch(self) -> float | None: ...

    @property
    def heartbeat_interval_seconds(self) -> float | None: ...

    @property
    def clock_skew_seconds(self) -> float | None: ...


@dataclass(frozen=True)
class Heartbeat:
    """A :class:`Heartbeating` of its own, for a writer whose document is not a job's status (a standby)."""

    heartbeat_epoch: float | None = None
    heartbeat_interval_seconds: float | None = None
    clock_skew_seconds: float | None = None


def heartbeat_age(beat: Heartbeating | None, now: datetime | float) -> float | None:
    """Seconds since the heartbeat, or None when there is no usable heartbeat."""
    if beat is None or beat.heartbeat_epoch is None:
        return None
    return (now.timestamp() if isinstance(now, datetime) else float(now)) - float(beat.heartbeat_epoch)


def clock_skew(beat: Heartbeating | None) -> float:
    """The clock skew the job declared between its driver and the readers of its status (seconds); a negative
    one is none declared."""
    declared = None if beat is None else beat.clock_skew_seconds
    if declared is not None and declared >= 0:
        return float(declared)
    return DEFAULT_CLOCK_SKEW_SECONDS


def heartbeat_limit(beat: Heartbeating | None, floor: float) -> float:
    """How old a heartbeat may look: ``floor``, or :data:`STALE_AFTER_INTERVALS` of a slow-beating writer's
    intervals, plus the declared skew."""
    interval = None if beat is None else beat.heartbeat_interval_seconds
    limit = floor
    if interval is not None:
        limit = max(floor, STALE_AFTER_INTERVALS * float(interval))
    return limit + clock_skew(beat)


def is_stale(beat: Heartbeating | None, floor: float, now: datetime | float) -> bool:
    """Whether the heartbeat is missing or older than :func:`heartbeat_limit`."""
    age = heartbeat_age(beat, now)
    return age is None or age > heartbeat_limit(beat, floor)


def liveness(status: StatusDocument | None, *, now: datetime | float, processes_gone: bool | None,
             max_heartbeat_age: float = DEFAULT_MAX_HEARTBEAT_AGE) -> Liveness:
    """Apply the rules in order (see the module docstring) to one status read at ``now``.

    ``processes_gone``: True when the driver ran on this host and its Python process and JVM are both gone;
    False when they are not; None when it cannot be told here (another host, no pids recorded).
    """
    if status is None:  # 1
        return Liveness(Life.NO_STATUS, "the job has never reported a status")
    state = status.state_text
    age = heartbeat_age(status, now)
    if status.state not in LIVE_STATES:  # 2
        return Liveness(Life.ENDED, f"the job is {state}", age)
    if processes_gone:  # 3
        return Liveness(Life.GONE, f"the driver is gone: state {state} but its process (pid {status.pid}) "
                                   f"and its JVM (pid {status.jvm_pid}) no longer exist on {status.host}", age)
    if is_stale(status, max_heartbeat_age, now):  # 4
        return Liveness(Life.STALE, f"the driver is gone: state {state} but no heartbeat for "
                                    f"{'ever' if age is None else f'{age:.0f}s'}", age)
    return Liveness(Life.ALIVE, f"the job is {state}", age)  # 5


#: Shown states beside the recorded ones (``core.job_state``): no status yet, a driver gone without saying so,
#: and a run whose recovery (the watchdog or the supervisor) gave up.
NOT_STARTED, DEAD, GAVE_UP = "NOT_STARTED", "DEAD", "GAVE_UP"


@dataclass(frozen=True)
class ShownState:
    """The one state every front end shows, the state the driver last wrote (None: no status), and why."""

    state: str
    recorded: str | None
    reason: str


def shown_state(status: StatusDocument | None, found: Liveness, gave_up: str | None = None) -> ShownState:
    """The state to show for ``status``, judged ``found`` by :func:`liveness`. Rules, in order:

    1. No status: NOT_STARTED.
    2. Not alive, and recovery gave up on this run (``gave_up``: the give-up's reason, the caller reads it
       from the history): GAVE_UP. Nothing will restart it; a driver that says RUNNING says so no longer.
    3. An active state the driver can no longer be in (``found.lost``): DEAD; recovery may still act.
    4. Otherwise what the driver wrote: alive (STARTING, RUNNING, DRAINING) or ended and said so.
    """
    recorded = None if status is None else status.state_text
    recorded_text = None if recorded is None else str(recorded)
    if status is None:  # 1
        return ShownState(NOT_STARTED, None, found.reason)
    if gave_up and not found.alive:  # 2
        return ShownState(GAVE_UP, recorded_text, gave_up)
    if found.lost:  # 3
        return ShownState(DEAD, recorded_text, found.reason)
    return ShownState(recorded_text or "UNKNOWN", recorded_text, found.reason)  # 4
