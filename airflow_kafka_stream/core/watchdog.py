"""Keep a job running: decide, from what the watchdog sees, whether to restart it, as pure rules.

Flink restarts a failed job by itself within a restart strategy; here a
watchdog run (every few minutes) looks at the job and decides. Rules, checked
in order; the first that applies decides:

1. The job never reported a status: nothing to watch.
2. A stop was requested, or the job is STOPPED: it was stopped on purpose and
   is never restarted.
3. A driver was launched (a submit, a restart) and has not reported yet, its
   process still there: it is starting; nothing to do, it is not dead.
4. The job is dead (FAILED, or gone by the one liveness rule, ``core.liveness``:
   its driver's processes are gone on this host, or its heartbeat is stale) or
   stuck (RUNNING, heart-beating, but its last committed batch has not moved
   for ``stuck_after_seconds`` while records wait and the lag does not
   shrink): it needs a restart. Otherwise it is fine.
5. It was restarted ``max_restarts`` times within ``window_seconds``: a crash
   loop (a record that kills every batch, a broken deploy). Give up, loudly,
   with the driver's last error; restarting again would only repeat it. The
   scheduled watchdog and the event-driven supervisor share this one budget
   (either restarts the same job; two budgets would double the restarts of a
   crash loop), so the give-up counts and names both.
6. The last restart was less than the backoff ago (``backoff_seconds``,
   doubling with every restart in the window): wait for a later run.
7. Restart it (a stuck driver is stopped at once first).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.liveness import liveness
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.values import seconds


class Action(enum.StrEnum):
    NOTHING = "nothing"
    RESTART = "restart"
    KILL_AND_RESTART = "kill-and-restart"
    WAIT_BACKOFF = "wait-backoff"
    GIVE_UP = "give-up"


@dataclass(frozen=True)
class Policy:
    stuck_after_seconds: float = 600.0
    max_restarts: int = 3
    window_seconds: float = 3600.0
    backoff_seconds: float = 30.0
    max_heartbeat_age: float = 30.0

    def __post_init__(self) -> None:
        for name in ("stuck_after_seconds", "window_seconds", "max_heartbeat_age"):
            seconds(getattr(self, name), name)
        seconds(self.backoff_seconds, "backoff_seconds", allow_zero=True)
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 1:
            raise ValueError(f"max_restarts must be a whole number >= 1, got {self.max_restarts!r}")


#: Who restarts a job: the scheduled watchdog, or the event-driven supervisor (``StreamSupervisorOperator``).
WATCHDOG, SUPERVISOR = "watchdog", "supervisor"
RESTARTERS = (WATCHDOG, SUPERVISOR)

#: The history records of a restart by the watchdog or the supervisor, and of a hot standby's takeover
#: (``core.failover``): the restarts of the one budget.
RESTART_OPERATION, FAILOVER_OPERATION = "watchdog-restart", "failover"
#: The ``cause`` a restart's own submit records (it starts no new chapter).
RESTART_CAUSE = "watchdog"
#: Operations that start a new chapter: a deliberate submit, stop, restore or reset resets the restart budget.
DELIBERATE = ("submit", "stop", "restore", "reset")


@dataclass(frozen=True)
class Restart:
    """One restart of the job: when, and by whom (one of :data:`RESTARTERS`; None when its record does not say)."""

    at: datetime
    by: str | None = None


def count_by_restarter(restarts: Sequence[Restart]) -> str:
    """``2 by the supervisor, 1 by the watchdog``: who used the shared budget, the most first."""
    counts: dict[str | None, int] = {}
    for restart in restarts:
        counts[restart.by] = counts.get(restart.by, 0) + 1
    named = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    return ", ".join(f"{n} by the {_NAMES.get(who, who)}" if who else f"{n} not recorded by whom" for who, n in named)


#: How a give-up names a restarter whose record name is not a noun.
_NAMES = {"failover": "hot standby's failover"}


def restarts_in(history: Iterable[Mapping[str, Any]]) -> list[Restart]:
    """When, and by whom (the watchdog, the supervisor, a hot standby's failover), the job was restarted since
    the last deliberate operation, from its history records (successful restarts only): the one budget all use."""
    found: list[Restart] = []
    for record in history:
        args = record.get("args") or {}
        operation = record.get("operation")
        if operation in DELIBERATE and record.get("result") == "ok" and args.get("cause") != RESTART_CAUSE:
            if operation != "submit" or (record.get("after") or {}).get("action") == "launched":
                found = []
            continue
        if operation in (RESTART_OPERATION, FAILOVER_OPERATION) and record.get("result") == "ok":
            try:
                found.append(Restart(datetime.fromisoformat(record["started_at"]), args.get("restarter")))
            except (KeyError, TypeError, ValueError):
                continue
    return found


@dataclass(frozen=True)
class Progress:
    """Since when the job's last committed batch has been the same, and the lag then."""

    since: datetime
    last_batch_id: int | None
    lag: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since.isoformat(), "last_batch_id": self.last_batch_id, "lag": self.lag}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Progress | None:
        try:
            return cls(datetime.fromisoformat(data["since"]), data.get("last_batch_id"), data.get("lag"))
        except (TypeError, KeyError, ValueError):
            return None


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    progress: Progress | None = None
    #: Rule 2 decided: the job was stopped on purpose (a supervisor has nothing left to watch).
    stopped_on_purpose: bool = False


def track_progress(status: StatusDocument, previous: Progress | None, lag: int | None, now: datetime) -> Progress:
    """Keep the time the current last batch was first seen (a stuck job's clock keeps running)."""
    batch = status.last_batch_id
    if previous is not None and previous.last_batch_id == batch:
        return previous
    return Progress(now, batch, lag)


def _dead(status: StatusDocument, policy: Policy, now: datetime, processes_gone: bool | None) -> str | None:
    if status.state is JobState.FAILED:
        return f"the job FAILED: {status.error or 'no error recorded'}"
    found = liveness(status, now=now, processes_gone=processes_gone, max_heartbeat_age=policy.max_heartbeat_age)
    return found.reason if found.lost else None


def _stuck(status: StatusDocument, progress: Progress, lag: int | None, policy: Policy, now: datetime) -> str | None:
    if status.state is not JobState.RUNNING or lag is None or lag <= 0:
        return None
    waited = (now - progress.since).total_seconds()
    shrinking = progress.lag is not None and lag < progress.lag
    if waited >= policy.stuck_after_seconds and not shrinking:
        return (f"the job is stuck: RUNNING but batch {progress.last_batch_id} has been its last committed batch for "
                f"{waited:.0f}s while {lag} record(s) wait")
    return None


def decide(status: StatusDocument | None, *, stop_requested: bool, restarts: Sequence[Restart],
           previous: Progress | None, lag: int | None, now: datetime, policy: Policy,
           processes_gone: bool | None = None, starting: str | None = None) -> Decision:
    """Apply the rules in order (see the module docstring).

    ``processes_gone``: whether the driver's processes are gone on this host (None: cannot tell), as in
    ``core.liveness``; ``starting``: what says a launched driver has not reported yet (None: none is starting).
    """
    if status is None:  # 1
        return Decision(Action.NOTHING, "the job has never reported a status")
    if stop_requested or status.state is JobState.STOPPED:  # 2
        return Decision(Action.NOTHING, f"the job is {status.state_text}"
                                        + (" with a stop requested" if stop_requested else "") + ": stopped on purpose",
                        stopped_on_purpose=True)
    progress = track_progress(status, previous, lag, now)
    if starting:  # 3
        return Decision(Action.NOTHING, starting, progress)
    dead = _dead(status, policy, now, processes_gone)  # 4
    stuck = None if dead else _stuck(status, progress, lag, policy, now)
    if not dead and not stuck:
        return Decision(Action.NOTHING, f"the job is {status.state_text} (last batch "
                                        f"{status.last_batch_id}, lag {lag})", progress)
    why = dead or stuck
    recent = sorted((r for r in restarts if (now - r.at).total_seconds() <= policy.window_seconds),
                    key=lambda r: r.at)
    if len(recent) >= policy.max_restarts:  # 5
        return Decision(Action.GIVE_UP, f"{why}; gave up: {len(recent)} restart(s) in the last "
                                        f"{policy.window_seconds:.0f}s ({count_by_restarter(recent)}), the limit of "
                                        f"{policy.max_restarts} the supervisor and the watchdog share: a crash loop, "
                                        "not restarting it again. Last error: "
                                        f"{status.error or 'none recorded'}", progress)
    if recent:  # 6
        backoff = policy.backoff_seconds * 2 ** (len(recent) - 1)
        since = (now - recent[-1].at).total_seconds()
        if since < backoff:
            return Decision(Action.WAIT_BACKOFF, f"{why}; restarted {since:.0f}s ago, next restart after "
                                                 f"{backoff:.0f}s", progress)
    return Decision(Action.KILL_AND_RESTART if stuck else Action.RESTART, why, progress)  # 7
