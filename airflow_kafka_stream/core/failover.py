"""A hot standby's decisions, as pure rules: when it takes a job over, and when one is (re)launched.

A hot standby is a standby driver of the running version (``core.standby``), kept READY beside the job so
that a driver's death costs a takeover (about what an upgrade's handover costs) instead of a cold driver
start. It never decides alone what "dead" means: :func:`judge_failover` asks the watchdog's rules
(``core.watchdog.decide``, the one liveness rule and the one restart budget the supervisor and the watchdog
share), judging death only (a stuck job is the watchdog's: it needs Kafka and a memory of progress):

1. The job was stopped on purpose (a stop was requested, or it is STOPPED): STAND_DOWN; a hot standby never
   takes over a job someone stopped, and has nothing left to stand by for.
2. The job is dead and the budget allows a restart now: TAKE_OVER.
3. The job is dead and the budget says wait (the backoff after a recent restart): WAIT.
4. The job is dead and the budget is spent (a crash loop): STAND_DOWN with the reason; recovery gives up
   (the supervisor or the watchdog records the give-up), and a new driver would only crash again.
5. Otherwise (alive, or it never reported): WAIT.

:func:`relaunch_due` is the keeper's rule for launching a hot standby when the job wants one and none is live,
with a backoff so that a standby that cannot come up is not relaunched in a loop.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.watchdog import Action, Policy, Restart, decide

#: Who restarted the job in the shared budget (beside ``core.watchdog.RESTARTERS``): a hot standby's takeover.
FAILOVER = "failover"

#: The history record of a hot standby's takeover (counted in the restart budget, see ``ops.watchdog``).
FAILOVER_OPERATION = "failover"

#: How long the supervisor and the watchdog leave a dead job to its live hot standby before they restart it
#: themselves (the standby takes over within seconds; one that has not by then is not going to).
FAILOVER_GRACE_SECONDS = 30.0


class Verdict(enum.StrEnum):
    WAIT = "wait"
    TAKE_OVER = "take-over"
    STAND_DOWN = "stand-down"


@dataclass(frozen=True)
class FailoverDecision:
    verdict: Verdict
    reason: str


def judge_failover(status: StatusDocument | None, *, stop_requested: bool, restarts: Sequence[Restart],
                   now: datetime, policy: Policy, processes_gone: bool | None) -> FailoverDecision:
    """Apply the rules of the module docstring to one look at the job (its status, as the standby read it)."""
    decision = decide(status, stop_requested=stop_requested, restarts=restarts, previous=None, lag=None, now=now,
                      policy=policy, processes_gone=processes_gone)
    if decision.stopped_on_purpose:  # 1
        return FailoverDecision(Verdict.STAND_DOWN, decision.reason)
    if decision.action in (Action.RESTART, Action.KILL_AND_RESTART):  # 2
        return FailoverDecision(Verdict.TAKE_OVER, decision.reason)
    if decision.action is Action.GIVE_UP:  # 4
        return FailoverDecision(Verdict.STAND_DOWN, decision.reason)
    return FailoverDecision(Verdict.WAIT, decision.reason)  # 3, 5


@dataclass(frozen=True)
class RelaunchPolicy:
    """How often a hot standby that keeps failing is launched again: after ``backoff_seconds``, doubling with
    each launch in ``window_seconds``, and not at all after ``max_launches`` launches in it."""

    backoff_seconds: float = 30.0
    window_seconds: float = 3600.0
    max_launches: int = 5


@dataclass(frozen=True)
class Relaunch:
    due: bool
    reason: str


def relaunch_due(launches: Sequence[datetime], now: datetime, policy: RelaunchPolicy = RelaunchPolicy()) -> Relaunch:
    """Whether a hot standby may be launched now, given the launches since the job last had a standby that
    served (a takeover) or was deliberately changed (a submit, an upgrade, a restore): the first at once, then
    with a doubling backoff, never more than ``max_launches`` in the window."""
    recent = sorted(at for at in launches if (now - at).total_seconds() <= policy.window_seconds)
    if len(recent) >= policy.max_launches:
        return Relaunch(False, f"{len(recent)} hot standbys launched in the last {policy.window_seconds:.0f}s "
                               "did not last: not launching another (see the standby's log; a submit or an "
                               "upgrade starts over)")
    if recent:
        backoff = policy.backoff_seconds * 2 ** (len(recent) - 1)
        since = (now - recent[-1]).total_seconds()
        if since < backoff:
            return Relaunch(False, f"the last hot standby was launched {since:.0f}s ago; the next launch after "
                                   f"{backoff:.0f}s")
    return Relaunch(True, "no hot standby is live" + (f" ({len(recent)} launched recently)" if recent else ""))
