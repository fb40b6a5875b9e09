"""Burrow's window rules: a consumer group judged over its recent looks, not one look at a time.

Each verification (the CLI's ``verify``, the verify operator, the group-sync sensor) is a look: its time, and
per partition the group's committed offset and the high watermark. The job home keeps the recent looks
(``storage.layout.LAG_WINDOW``, bounded by :func:`bound`); these rules judge them. Burrow-evaluator style:
every rule is a small function named for what it detects; a partition's window status is the first rule that
fires, checked in order of severity; findings are statuses, not exceptions; the clock is an argument.

``window`` is a duration: the looks of the last two windows are kept (at most :data:`MAX_LOOKS`), so STOP
can see an offset that stood for longer than one. A move of the group caused by a recorded reset or restore
(``resets``: the times and targets of those history records) is not a rewind; a move back past the targets
that record set is one, even in the same window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import pairwise
from typing import Any

from airflow_kafka_stream.core.offsets import TopicPartition, records_behind

#: Looks the job home keeps at most (the oldest go first), and how many windows back they reach.
MAX_LOOKS = 100
KEPT_WINDOWS = 2
#: Commits (looks at which the group's offset moved forward) that WARN needs before lag growth counts.
MIN_COMMITS = 3


class WindowStatus(StrEnum):
    """Window statuses, most severe first."""

    REWIND = "REWIND"
    STOP = "STOP"
    WARN = "WARN"
    OK = "OK"

    @property
    def severity(self) -> int:
        return len(_ORDER) - 1 - _ORDER.index(self)

    @property
    def is_problem(self) -> bool:
        """REWIND and STOP are problems (verify exits 1); WARN is a warning (verify exits 0)."""
        return self in (WindowStatus.REWIND, WindowStatus.STOP)


_ORDER = list(WindowStatus)


@dataclass(frozen=True)
class Look:
    """One look at the group: when, whether the job's status named a live state, and per partition the
    group's committed offset and the high watermark (either None when unknown)."""

    at: datetime
    partitions: Mapping[TopicPartition, tuple[int | None, int | None]]
    live: bool = False

    def to_dict(self) -> dict[str, Any]:
        nested: dict[str, dict[str, list[int | None]]] = {}
        for tp, (group, high) in sorted(self.partitions.items()):
            nested.setdefault(tp.topic, {})[str(tp.partition)] = [group, high]
        return {"at": self.at.isoformat(), "live": self.live, "partitions": nested}

    @classmethod
    def parse(cls, raw: Any) -> Look | None:
        """None for a look that is not one (a hand-edited or broken file): it is left out, never fatal."""
        if not isinstance(raw, Mapping) or not isinstance(raw.get("partitions"), Mapping):
            return None
        try:
            at = datetime.fromisoformat(str(raw.get("at")))
            partitions = {TopicPartition(str(topic), int(part)): (_whole(pair[0]), _whole(pair[1]))
                          for topic, parts in raw["partitions"].items() if isinstance(parts, Mapping)
                          for part, pair in parts.items() if isinstance(pair, list | tuple) and len(pair) == 2}
        except (TypeError, ValueError):
            return None
        return cls(at, partitions, raw.get("live") is True)


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def bound(looks: Iterable[Look], now: datetime, window: timedelta, max_looks: int = MAX_LOOKS) -> list[Look]:
    """The looks the job home keeps: those of the last :data:`KEPT_WINDOWS` windows, oldest first, at most
    ``max_looks`` (the newest)."""
    kept = sorted((look for look in looks if look.at >= now - KEPT_WINDOWS * window), key=lambda look: look.at)
    return kept[-max_looks:]


@dataclass(frozen=True)
class Point:
    """One partition at one look."""

    at: datetime
    offset: int
    high: int | None

    @property
    def lag(self) -> int | None:
        return None if self.high is None else records_behind(self.high, self.offset)


@dataclass(frozen=True)
class Track:
    """One partition across the window's looks that saw a group offset for it, oldest first."""

    partition: TopicPartition
    points: tuple[Point, ...]
    #: Whether the newest look found the job in a live state (a stopped job is expected not to commit).
    live: bool

    def stood_since(self, index: int) -> int:
        """The first index of the run of equal offsets that ends at ``index``."""
        start = index
        while start > 0 and self.points[start - 1].offset == self.points[index].offset:
            start -= 1
        return start


@dataclass(frozen=True)
class RecordedMove:
    """A recorded reset or restore: when it ran, and the offsets it set per partition (None when its record
    names none: a record of a failed operation, or one written before targets were recorded)."""

    started: datetime
    finished: datetime
    targets: Mapping[TopicPartition, int] | None = None

    def target(self, partition: TopicPartition) -> int | None:
        return None if self.targets is None else self.targets.get(partition)

    def explains(self, partition: TopicPartition, moved_to: int) -> bool:
        """Whether it can have moved ``partition`` back to ``moved_to``: to its own target, or above it (the job
        committed forward from there before the look). A record with no targets is taken at its word."""
        if self.targets is None:
            return True
        target = self.targets.get(partition)
        return target is not None and moved_to >= target


@dataclass(frozen=True)
class Clock:
    """What the rules need besides the looks, passed in: now, the window, and the recorded resets/restores."""

    now: datetime
    window: timedelta
    resets: tuple[RecordedMove, ...] = ()


@dataclass(frozen=True)
class Finding:
    detail: str
    numbers: dict[str, Any] = field(default_factory=dict)


Rule = Callable[[Track, Clock], Finding | None]


# 1. REWIND: the group's offset moved backwards and no later look saw it back where it was, with no reset or
#    restore recorded between the look that last saw it move forward to there and the look that saw it move back
#    that set it to where it went (or lower: the job may have committed forward since).
def rewound(track: Track, clock: Clock) -> Finding | None:
    points, newest = track.points, track.points[-1] if track.points else None
    for index, (before, after) in enumerate(pairwise(points)):
        if after.offset >= before.offset or newest is None:
            continue
        if any(later.offset >= before.offset for later in points[index + 2:]):
            continue  # it came back (a later move down is judged on its own)
        since = track.stood_since(index)
        after_time = points[since - 1].at if since > 0 else points[0].at - clock.window
        meanwhile = [move for move in clock.resets if move.started <= after.at and move.finished > after_time]
        if any(move.explains(track.partition, after.offset) for move in meanwhile):
            continue
        targets = sorted({t for move in meanwhile
                          if (t := move.target(track.partition)) is not None and t < before.offset})
        why = (f"the reset or restore recorded meanwhile set it to {' or '.join(map(str, targets))}, not lower"
               if targets else "with no reset or restore recorded")
        return Finding(
            f"group offset moved back from {before.offset} to {after.offset} between {before.at.isoformat()} "
            f"and {after.at.isoformat()} and is at {newest.offset} now, {why}: "
            "something else committed to the group (another consumer, a tool); align it with an executed "
            "reset to-current",
            {"from_offset": before.offset, "to_offset": after.offset, "now_offset": newest.offset,
             "moved_back_at": after.at.isoformat(), "records": before.offset - newest.offset})
    return None


# 2. STOP: records wait and the group's offset has not moved for longer than the window, while the job's
#    status says it runs.
def stopped(track: Track, clock: Clock) -> Finding | None:
    if not track.live or not track.points:
        return None
    newest = track.points[-1]
    if not newest.lag:
        return None
    since = track.points[track.stood_since(len(track.points) - 1)].at
    idle = clock.now - since
    if idle <= clock.window:
        return None
    return Finding(
        f"no commit for {_seconds(idle)} (window {_seconds(clock.window)}): the group's offset is "
        f"{newest.offset} at every look since {since.isoformat()} while {newest.lag} records wait",
        {"offset": newest.offset, "lag": newest.lag, "since": since.isoformat(),
         "idle_seconds": round(idle.total_seconds(), 3), "window_seconds": clock.window.total_seconds()})


# 3. WARN: over the last window, the lag grew at every commit (each look at which the group's offset moved
#    forward), and there were at least MIN_COMMITS of them.
def falling_behind(track: Track, clock: Clock) -> Finding | None:
    recent = [p for p in track.points if p.at >= clock.now - clock.window]
    commits = [(before, after) for before, after in pairwise(recent) if after.offset > before.offset]
    if len(commits) < MIN_COMMITS or any(b.lag is None or a.lag is None for b, a in commits):
        return None
    if not all(after.lag > before.lag for before, after in commits):  # type: ignore[operator]
        return None
    first, last = commits[0][0], commits[-1][1]
    return Finding(
        f"lag grew at each of the last {len(commits)} commits, from {first.lag} to {last.lag} records over "
        f"{_seconds(last.at - first.at)}: the job reads slower than the topic is written",
        {"commits": len(commits), "lag_from": first.lag, "lag_to": last.lag,
         "seconds": round((last.at - first.at).total_seconds(), 3)})


#: The rules in order of severity; a partition's window status is the first that fires.
RULES: tuple[tuple[WindowStatus, Rule], ...] = (
    (WindowStatus.REWIND, rewound),
    (WindowStatus.STOP, stopped),
    (WindowStatus.WARN, falling_behind),
)


@dataclass(frozen=True)
class WindowFinding:
    """One partition whose window status is not OK: the rule that fired and its numbers."""

    partition: TopicPartition
    status: WindowStatus
    rule: str
    detail: str
    numbers: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.partition.topic, "partition": self.partition.partition, "status": self.status.value,
                "rule": self.rule, "detail": self.detail, **self.numbers}


@dataclass(frozen=True)
class WindowVerdict:
    """The window's findings (partitions that are not OK, most severe first) over ``looks`` looks."""

    findings: tuple[WindowFinding, ...]
    looks: int
    since: datetime | None
    window: timedelta

    @property
    def status(self) -> WindowStatus:
        return self.findings[0].status if self.findings else WindowStatus.OK

    @property
    def rule(self) -> str | None:
        return self.findings[0].rule if self.findings else None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "rule": self.rule, "window_seconds": self.window.total_seconds(),
                "looks": self.looks, "since": self.since.isoformat() if self.since else None,
                "findings": [finding.to_dict() for finding in self.findings]}


def tracks(looks: Sequence[Look]) -> list[Track]:
    """Per partition, the looks that saw a group offset for it."""
    ordered = sorted(looks, key=lambda look: look.at)
    live = ordered[-1].live if ordered else False
    partitions = sorted({tp for look in ordered for tp in look.partitions})
    found = []
    for tp in partitions:
        points = tuple(Point(look.at, look.partitions[tp][0], look.partitions[tp][1]) for look in ordered
                       if tp in look.partitions and look.partitions[tp][0] is not None)
        if points:
            found.append(Track(tp, points, live))  # type: ignore[arg-type]
    return found


def evaluate_window(looks: Sequence[Look], clock: Clock) -> WindowVerdict:
    """Apply the rules to every partition of the looks; never raises for findings."""
    findings = []
    for track in tracks(looks):
        for status, rule in RULES:
            found = rule(track, clock)
            if found is not None:
                findings.append(WindowFinding(track.partition, status, rule.__name__, found.detail, found.numbers))
                break
    findings.sort(key=lambda f: (-f.status.severity, f.partition))
    since = min((look.at for look in looks), default=None)
    return WindowVerdict(tuple(findings), len(looks), since, clock.window)


def resets_of(records: Iterable[Mapping[str, Any]]) -> tuple[RecordedMove, ...]:
    """The history's resets and restores that may have moved the group (not refused), with their targets: a
    reset's ``targets``, a restore's savepoint offsets (where the job resumes and commits from)."""
    found = []
    for record in records:
        if record.get("operation") not in ("reset", "restore") or record.get("result") == "refused":
            continue
        try:
            started = datetime.fromisoformat(str(record.get("started_at")))
            finished = datetime.fromisoformat(str(record.get("finished_at") or record.get("started_at")))
        except ValueError:
            continue
        found.append(RecordedMove(started, finished, _targets(record)))
    return tuple(found)


def _targets(record: Mapping[str, Any]) -> dict[TopicPartition, int] | None:
    """The offsets a reset or restore record says it set; None when it names none (or not readably)."""
    after = record.get("after")
    if not isinstance(after, Mapping):
        return None
    savepoint = after.get("savepoint")
    nested = after.get("targets") if record.get("operation") == "reset" else (
        savepoint.get("offsets") if isinstance(savepoint, Mapping) else None)
    if not isinstance(nested, Mapping):
        return None
    try:
        return {TopicPartition(str(topic), int(part)): int(offset) for topic, parts in nested.items()
                for part, offset in parts.items()}
    except (AttributeError, TypeError, ValueError):
        return None


def _seconds(delta: timedelta) -> str:
    return f"{int(delta.total_seconds())}s"
