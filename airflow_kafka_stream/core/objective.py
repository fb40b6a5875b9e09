"""A job's lag objective ("records are processed within 2 minutes") and the judgement of one look at it.

The objective is a time lag (``max_lag_seconds``: how old the oldest record not processed yet may be, the
driver's ``time_lag`` in ``status.json``) and how long it may be exceeded (``for_seconds``). A breach is the
time lag above ``max_lag_seconds`` at every look for ``for_seconds``: the looks keep a small memory (when the
lag went above, and each partition's lag then) in the job home between them, so a breach can span the pokes
of a sensor or the runs of a scheduled DAG. A look that finds the lag at or below the objective ends the
streak. Pure: the status's time lag, the memory and ``now`` are passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from airflow_kafka_stream.core.status_document import TimeLag
from airflow_kafka_stream.errors import InvalidInputError

#: Partitions a breach message lists (the most behind first); the rest are counted.
LISTED_PARTITIONS = 10


def _positive(value: Any, name: str) -> float:
    """A number above 0 (a numeric text too: a templated parameter); refused naming ``name`` otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise InvalidInputError(f"{name} must be a number of seconds above 0, got {value!r}: a lag objective "
                                "needs a positive lag and a positive duration", setting=name)
    return number


@dataclass(frozen=True)
class LagObjective:
    """At most ``max_lag_seconds`` of time lag; a breach when it is exceeded for ``for_seconds``."""

    max_lag_seconds: float
    for_seconds: float

    @classmethod
    def of(cls, max_lag_seconds: Any, for_seconds: Any) -> LagObjective:
        """The objective from settings as given (numbers or numeric text); refuses zero, negative or no number."""
        return cls(_positive(max_lag_seconds, "max_lag_seconds"), _positive(for_seconds, "for_seconds"))

    @classmethod
    def parse(cls, raw: Any) -> LagObjective | None:
        """The objective of a recorded document, None when it holds none (or a bad one)."""
        if not isinstance(raw, Mapping):
            return None
        try:
            return cls.of(raw.get("max_lag_seconds"), raw.get("for_seconds"))
        except InvalidInputError:
            return None

    def to_dict(self) -> dict[str, float]:
        return {"max_lag_seconds": self.max_lag_seconds, "for_seconds": self.for_seconds}

    def __str__(self) -> str:
        return f"time lag at most {self.max_lag_seconds:g}s (a breach after {self.for_seconds:g}s above)"


class Verdict(StrEnum):
    MET = "met"  # the time lag is at or below the objective
    ABOVE = "above"  # above, not yet for for_seconds
    BREACH = "breach"  # above for for_seconds
    NOT_RUNNING = "not-running"  # the job's status names no live state: no lag to hold to the objective
    UNMEASURED = "unmeasured"  # the running job has not measured its time lag yet


@dataclass(frozen=True)
class ObjectiveCheck:
    """One look's judgement, the partitions above the objective (most behind first) and the memory to keep."""

    verdict: Verdict
    message: str
    objective: LagObjective
    max_seconds: float | None = None
    measured_at: datetime | None = None
    above_since: datetime | None = None
    partitions: tuple[dict[str, Any], ...] = ()
    memory: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "message": self.message, "objective": self.objective.to_dict(),
                "max_seconds": self.max_seconds,
                "measured_at": self.measured_at.isoformat() if self.measured_at else None,
                "above_since": self.above_since.isoformat() if self.above_since else None,
                "partitions": list(self.partitions)}


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def trend(now_seconds: float, then_seconds: float | None) -> str:
    """``rising``, ``falling`` or ``steady`` (within a second), or ``new`` without an earlier value."""
    if then_seconds is None:
        return "new"
    change = now_seconds - then_seconds
    return "rising" if change > 1 else "falling" if change < -1 else "steady"


def judge_objective(objective: LagObjective, time_lag: TimeLag | None, live: bool, now: datetime,
                    memory: Mapping[str, Any] | None = None) -> ObjectiveCheck:
    """Judge one look: the job's state (``live``), its last time lag measurement and the previous looks'
    ``memory`` (what :attr:`ObjectiveCheck.memory` returned last time, or None)."""
    if not live:
        return ObjectiveCheck(Verdict.NOT_RUNNING, "the job does not run: there is no lag to hold to the "
                              f"objective ({objective})", objective)
    if time_lag is None:
        return ObjectiveCheck(Verdict.UNMEASURED, "the job has not measured its time lag yet", objective,
                              memory=dict(memory or {}))
    measured = f" (measured at {time_lag.measured_at.isoformat()})" if time_lag.measured_at else ""
    if time_lag.max_seconds <= objective.max_lag_seconds:
        return ObjectiveCheck(Verdict.MET, f"time lag {time_lag.max_seconds:g}s is within the objective "
                              f"({objective}){measured}", objective, time_lag.max_seconds, time_lag.measured_at)
    previous = memory or {}
    above_since = _time(previous.get("above_since")) or now
    first = previous.get("first") if previous.get("above_since") else None
    first = first if isinstance(first, Mapping) else {}
    if not previous.get("above_since"):
        first = {topic: dict(parts) for topic, parts in time_lag.partitions.items()}
    rows = []
    for topic, partition, seconds in time_lag.worst():
        if seconds <= objective.max_lag_seconds:
            continue
        then = (first.get(topic) or {}).get(str(partition))
        then = float(then) if isinstance(then, int | float) and not isinstance(then, bool) else None
        rows.append({"topic": topic, "partition": partition, "seconds": seconds, "trend": trend(seconds, then),
                     "change_seconds": None if then is None else round(seconds - then, 3)})
    kept = {"above_since": above_since.isoformat(), "first": first}
    above_for = (now - above_since).total_seconds()
    listed = ", ".join(f"{r['topic']}:{r['partition']} {r['seconds']:g}s ({r['trend']}"
                       + (f" {r['change_seconds']:+g}s" if r["change_seconds"] is not None else "") + ")"
                       for r in rows[:LISTED_PARTITIONS])
    more = f" and {len(rows) - LISTED_PARTITIONS} more" if len(rows) > LISTED_PARTITIONS else ""
    lead = (f"time lag {time_lag.max_seconds:g}s is above the objective's {objective.max_lag_seconds:g}s since "
            f"{above_since.isoformat()} ({above_for:.0f}s")
    if above_for >= objective.for_seconds:
        return ObjectiveCheck(Verdict.BREACH, f"lag objective breached: {lead}, allowed {objective.for_seconds:g}s)"
                              f"{measured}; partitions: {listed}{more}", objective, time_lag.max_seconds,
                              time_lag.measured_at, above_since, tuple(rows), kept)
    return ObjectiveCheck(Verdict.ABOVE, f"{lead} of {objective.for_seconds:g}s allowed){measured}; partitions: "
                          f"{listed}{more}", objective, time_lag.max_seconds, time_lag.measured_at, above_since,
                          tuple(rows), kept)
