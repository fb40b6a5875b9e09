"""Offset reset planning, with the strategies of ``kafka-consumer-groups.sh --reset-offsets``.

A plan is a value computed from values passed in (checkpoint and group offsets,
watermarks, offsets already looked up for a time); it does no I/O, so it can be
printed, exported and reviewed before anything executes it.

Rules:
- The base of a relative strategy (to-current, shift-by) is the checkpoint offset,
  because Spark restarts from the checkpoint; a partition the checkpoint lacks
  (new partition) starts from its low watermark, which is what the job would do.
- A target outside [low, high] is clamped to the nearest watermark with a
  warning, as Kafka's tool does; ``strict=True`` refuses the plan instead.
- Partitions outside the scope keep their checkpoint offset: an executed reset
  writes a full offsets line (:meth:`ResetPlan.checkpoint_offsets`) and commits
  only the changed partitions to the group (:meth:`ResetPlan.changes`).
- Per-partition strategies (to-offset with a mapping, from-file, to-recorded)
  change only the partitions they list; listing one outside an explicit scope
  or one the topic does not have is refused.
- A checkpoint partition the topic no longer has, inside the scope, is dropped
  from the offsets line (with a warning): keeping it makes the restart fail.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

import pendulum

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, parse_offsets_json
from airflow_kafka_stream.core.reset_csv import parse_reset_csv, render_reset_csv
from airflow_kafka_stream.errors import CheckpointFormatError, OffsetPlanError


class StrategyKind(StrEnum):
    """Reset strategies, named as in ``kafka-consumer-groups.sh`` (plus to-recorded for savepoints)."""

    TO_CURRENT = "to-current"
    TO_OFFSET = "to-offset"
    TO_DATETIME = "to-datetime"
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    SHIFT_BY = "shift-by"
    BY_DURATION = "by-duration"
    FROM_FILE = "from-file"
    TO_RECORDED = "to-recorded"


@dataclass(frozen=True)
class ResetStrategy:
    """Where to move offsets. Build one with the class methods or :func:`parse_strategy`."""

    kind: StrategyKind
    description: str
    offset: int | None = None
    offsets: Mapping[TopicPartition, int] | None = None
    shift: int | None = None
    timestamp_ms: int | None = None

    @property
    def needs_timestamp_lookup(self) -> bool:
        """True when the caller must pass offsets looked up for :attr:`timestamp_ms`."""
        return self.timestamp_ms is not None

    @classmethod
    def to_current(cls) -> ResetStrategy:
        return cls(StrategyKind.TO_CURRENT, "to-current (the checkpoint's position)")

    @classmethod
    def to_earliest(cls) -> ResetStrategy:
        return cls(StrategyKind.TO_EARLIEST, "to-earliest (low watermark)")

    @classmethod
    def to_latest(cls) -> ResetStrategy:
        return cls(StrategyKind.TO_LATEST, "to-latest (high watermark)")

    @classmethod
    def to_offset(cls, offset: int) -> ResetStrategy:
        _require_int(offset, "to-offset", minimum=0)
        return cls(StrategyKind.TO_OFFSET, f"to-offset {offset}", offset=offset)

    @classmethod
    def to_offsets(cls, offsets: Mapping[TopicPartition, int], kind: StrategyKind = StrategyKind.TO_OFFSET,
                   source: str = "per-partition offsets") -> ResetStrategy:
        """Per-partition targets (to-offset with a mapping, from-file, to-recorded)."""
        if not offsets:
            raise OffsetPlanError(f"{kind} needs at least one partition offset; {source} lists none", setting="value")
        for tp, offset in offsets.items():
            _require_int(offset, f"{kind} offset for {tp}", minimum=0)
        return cls(kind, f"{kind} {source} ({len(offsets)} partitions)", offsets=dict(offsets))

    @classmethod
    def from_file(cls, csv_text: str, source: str = "reset file") -> ResetStrategy:
        return cls.to_offsets(parse_reset_csv(csv_text, source), StrategyKind.FROM_FILE, source)

    @classmethod
    def to_recorded(cls, offsets: Mapping[TopicPartition, int], label: str = "recorded position") -> ResetStrategy:
        """A position recorded earlier, e.g. a savepoint's source offsets."""
        return cls.to_offsets(offsets, StrategyKind.TO_RECORDED, label)

    @classmethod
    def shift_by(cls, shift: int) -> ResetStrategy:
        _require_int(shift, "shift-by")
        return cls(StrategyKind.SHIFT_BY, f"shift-by {shift:+d}", shift=shift)

    @classmethod
    def to_datetime(cls, when: datetime) -> ResetStrategy:
        if when.tzinfo is None:
            raise OffsetPlanError(f"to-datetime {when.isoformat()} has no timezone; use parse_datetime",
                                  setting="value")
        return cls(StrategyKind.TO_DATETIME, f"to-datetime {when.isoformat()}", timestamp_ms=_epoch_ms(when))

    @classmethod
    def by_duration(cls, duration: str, now: datetime) -> ResetStrategy:
        """Now minus an ISO 8601 duration (``PT1H``, ``P1DT2H``)."""
        if now.tzinfo is None:
            raise OffsetPlanError("by-duration needs an aware 'now' (with a timezone)")
        when = now - parse_duration(duration)
        return cls(
            StrategyKind.BY_DURATION,
            f"by-duration {duration.strip().upper()} (since {when.isoformat()})",
            timestamp_ms=_epoch_ms(when),
        )


def parse_strategy(kind: str, value: str | None = None, *, now: datetime | None = None,
                   timezone: str | None = None) -> ResetStrategy:
    """Build a strategy from text, as the CLI and Airflow params give it.

    ``value`` is: an offset (or offsets JSON ``{"t":{"0":5}}``) for to-offset, a number for
    shift-by, a date-time for to-datetime, a duration for by-duration, the CSV text for
    from-file, offsets JSON for to-recorded, and nothing for the others.
    """
    try:
        strategy = StrategyKind((kind or "").strip().lower().removeprefix("--"))
    except ValueError:
        raise OffsetPlanError(
            f"unknown reset strategy {kind!r}; use one of {', '.join(k.value for k in StrategyKind)}",
            setting="strategy"
        ) from None
    text = (value or "").strip()
    takes_value = strategy not in (StrategyKind.TO_CURRENT, StrategyKind.TO_EARLIEST, StrategyKind.TO_LATEST)
    if takes_value and not text:
        raise OffsetPlanError(f"reset strategy {strategy} needs a value ({_VALUE_HINT[strategy]})", setting="value")
    if not takes_value and text:
        raise OffsetPlanError(f"reset strategy {strategy} takes no value, got {text!r}", setting="value")
    match strategy:
        case StrategyKind.TO_CURRENT:
            return ResetStrategy.to_current()
        case StrategyKind.TO_EARLIEST:
            return ResetStrategy.to_earliest()
        case StrategyKind.TO_LATEST:
            return ResetStrategy.to_latest()
        case StrategyKind.TO_OFFSET if text.startswith("{"):
            return ResetStrategy.to_offsets(_offsets_json(text, strategy))
        case StrategyKind.TO_OFFSET:
            return ResetStrategy.to_offset(_parse_int(text, strategy))
        case StrategyKind.SHIFT_BY:
            return ResetStrategy.shift_by(_parse_int(text, strategy))
        case StrategyKind.TO_DATETIME:
            return ResetStrategy.to_datetime(parse_datetime(text, timezone))
        case StrategyKind.BY_DURATION:
            if now is None:
                raise OffsetPlanError("by-duration needs the current time ('now') to count back from")
            return ResetStrategy.by_duration(text, now)
        case StrategyKind.FROM_FILE:
            return ResetStrategy.from_file(value or "")
        case StrategyKind.TO_RECORDED:
            return ResetStrategy.to_recorded(_offsets_json(text, strategy))
    raise AssertionError(strategy)  # pragma: no cover - every kind is matched above


_VALUE_HINT = {
    StrategyKind.TO_OFFSET: 'an offset like 42, or per-partition offsets like {"orders":{"0":42}}',
    StrategyKind.SHIFT_BY: "a signed number of records like -100",
    StrategyKind.TO_DATETIME: "a date-time like 2024-05-01T12:00:00Z",
    StrategyKind.BY_DURATION: "an ISO 8601 duration like PT1H or P1DT2H",
    StrategyKind.FROM_FILE: "the CSV text of topic,partition,offset lines",
    StrategyKind.TO_RECORDED: 'offsets JSON like {"orders":{"0":42}}',
}
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_DATE_FIRST = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}.*)?$")
# java.time.Duration's grammar, as kafka-consumer-groups.sh --by-duration accepts it: PnDTnHnMn.nS.
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,9}))?S)?)?$")


def _parse_int(text: str, kind: StrategyKind) -> int:
    if not _INTEGER.match(text):
        raise OffsetPlanError(f"{kind} value {text!r} is not a whole number ({_VALUE_HINT[kind]})", setting="value")
    return int(text)


def _offsets_json(text: str, kind: StrategyKind) -> PartitionOffsets:
    try:
        return parse_offsets_json(text)
    except CheckpointFormatError as exc:
        raise OffsetPlanError(f"{kind} offsets are invalid: {exc}", setting="value") from exc


def _require_int(value: object, what: str, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OffsetPlanError(f"{what} must be a whole number, got {value!r}", setting="value")
    if minimum is not None and value < minimum:
        raise OffsetPlanError(
            f"{what} must be >= {minimum}, got {value}; use to-earliest or to-latest for the special positions",
            setting="value"
        )


def parse_datetime(text: str, timezone: str | None = None) -> pendulum.DateTime:
    """Parse an ISO 8601 date-time; a time without an offset needs ``timezone`` (e.g. 'Europe/Paris').

    An offset written in the text wins over ``timezone``. A naive time is refused
    rather than guessed: a reset one timezone off moves a job by hours.
    """
    stripped = (text or "").strip()
    if not _DATE_FIRST.match(stripped):
        raise OffsetPlanError(
            f"date-time {text!r} is not understood; write an ISO 8601 date-time starting with the date, "
            "like 2024-05-01T12:00:00Z or 2024-05-01T14:00:00+02:00", setting="value"
        )
    try:
        parsed = pendulum.parse(stripped, tz=None)
    except ValueError as exc:
        raise OffsetPlanError(
            f"date-time {text!r} is not a valid date-time ({exc}); write it like 2024-05-01T12:00:00Z", setting="value"
        ) from exc
    if not isinstance(parsed, pendulum.DateTime):  # pragma: no cover - the date-first check rules this out
        raise OffsetPlanError(f"{text!r} is not a date-time; write it like 2024-05-01T12:00:00Z", setting="value")
    if parsed.tzinfo is not None:
        return parsed
    if timezone is None:
        raise OffsetPlanError(
            f"date-time {text!r} has no timezone; add one (2024-05-01T12:00:00Z, ...+02:00) "
            "or give the timezone to read it in (e.g. timezone='Europe/Paris')", setting=("value", "timezone")
        )
    try:
        zone = pendulum.timezone(timezone)
    except ValueError as exc:
        raise OffsetPlanError(
            f"timezone {timezone!r} is unknown; use an IANA name like 'UTC' or 'Europe/Paris'", setting="timezone"
        ) from exc
    return zone.convert(parsed)


def parse_duration(text: str, setting: str = "value") -> timedelta:
    """Parse ``PnDTnHnMn.nS`` (java.time.Duration's form, which Kafka's --by-duration takes).

    ``setting`` is the argument the text came from, named by the refusal (a by-duration strategy's value
    unless the caller says otherwise: max_age, stall_threshold).
    """
    stripped = (text or "").strip().upper()
    match = _DURATION.match(stripped)
    if not match or stripped in ("P", "PT") or stripped.endswith("T"):
        hint = ""
        if re.match(r"^P.*\d+[YWM]", stripped.split("T")[0] if stripped.startswith("P") else ""):
            hint = "; years, months and weeks are not fixed lengths: count in days (P7D, P30D)"
        elif stripped.startswith("-"):
            hint = "; a negative duration points into the future: use to-latest instead"
        raise OffsetPlanError(
            f"duration {text!r} is not an ISO 8601 duration of the form PnDTnHnMnS, like PT1H, PT30M or P1DT2H{hint}",
            setting=setting
        )
    days, hours, minutes, seconds, fraction = match.groups()
    micros = int((fraction or "0").ljust(9, "0")[:6])
    return timedelta(days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0),
                     seconds=int(seconds or 0), microseconds=micros)


def _epoch_ms(when: datetime) -> int:
    # calendar.timegm keeps the arithmetic exact and in the standard library (pendulum's intervals differ).
    millis = calendar.timegm(when.utctimetuple()) * 1000 + when.microsecond // 1000
    if millis < 0:
        raise OffsetPlanError(f"time {when.isoformat()} is before 1970; Kafka timestamps start at the epoch",
                              setting="value")
    return millis


@dataclass(frozen=True)
class Scope:
    """Which partitions a reset touches: all the job's topics, or ``topic`` / ``topic:0,1`` specs."""

    topics: Mapping[str, frozenset[int] | None] = field(default_factory=dict)

    @property
    def is_all(self) -> bool:
        return not self.topics

    def describe(self) -> str:
        if self.is_all:
            return "all topics"
        return " ".join(t if p is None else f"{t}:{','.join(map(str, sorted(p)))}" for t, p in self.topics.items())

    def resolve(self, partitions_by_topic: Mapping[str, int]) -> set[TopicPartition]:
        """The partitions selected, checked against the job's topics and their partition counts."""
        if self.is_all:
            return {TopicPartition(t, p) for t, count in partitions_by_topic.items() for p in range(count)}
        selected: set[TopicPartition] = set()
        for topic, partitions in self.topics.items():
            if topic not in partitions_by_topic:
                raise OffsetPlanError(
                    f"scope names topic {topic!r}, which is not one of the job's topics "
                    f"({', '.join(sorted(partitions_by_topic)) or 'none'}); fix the topic name", setting="scope"
                )
            count = partitions_by_topic[topic]
            unknown = sorted(p for p in partitions or () if p >= count)
            if unknown:
                raise OffsetPlanError(
                    f"scope names partition(s) {', '.join(map(str, unknown))} of topic {topic!r}, which has "
                    f"{count} partitions (0..{count - 1}); fix the partition numbers", setting="scope"
                )
            selected.update(TopicPartition(topic, p) for p in (range(count) if partitions is None else partitions))
        return selected


def parse_scope(specs: str | Sequence[str] | None) -> Scope:
    """Parse scope specs: none for all the job's topics, else each ``topic`` or ``topic:0,1``."""
    if specs is None:
        return Scope()
    items = [specs] if isinstance(specs, str) else list(specs)
    topics: dict[str, frozenset[int] | None] = {}
    for raw in items:
        spec = raw.strip()
        if not spec:
            if len(items) == 1:
                return Scope()
            raise OffsetPlanError("empty topic in the scope; give 'topic' or 'topic:0,1'", setting="scope")
        topic, sep, parts = spec.partition(":")
        topic = topic.strip()
        if not topic:
            raise OffsetPlanError(f"scope {spec!r} has no topic name; write 'topic' or 'topic:0,1'", setting="scope")
        if not sep:
            topics[topic] = None
            continue
        numbers = [p.strip() for p in parts.split(",")]
        if not parts.strip() or any(not re.fullmatch(r"[0-9]+", p) for p in numbers):
            raise OffsetPlanError(
                f"scope {spec!r}: partitions must be a comma-separated list of numbers >= 0, like '{topic}:0,1'",
                setting="scope"
            )
        if topic in topics and topics[topic] is None:
            continue  # the whole topic is already selected
        topics[topic] = frozenset(int(p) for p in numbers) | (topics.get(topic) or frozenset())
    return Scope(topics)


@dataclass(frozen=True)
class ResetInputs:
    """Everything a plan needs, fetched by the caller (see ``kafka.control_inputs.collect_reset_inputs``).

    ``partitions_by_topic`` holds the job's topics that exist; ``watermarks`` covers
    their partitions; ``timestamp_offsets`` the in-scope partitions of a time-based strategy.
    """

    partitions_by_topic: Mapping[str, int]
    checkpoint: Mapping[TopicPartition, int]
    group: Mapping[TopicPartition, int | None]
    watermarks: Mapping[TopicPartition, tuple[int, int]]
    timestamp_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedPartition:
    """One partition of a plan. ``target`` None means the partition is left out of the offsets line."""

    partition: TopicPartition
    in_scope: bool
    checkpoint_offset: int | None
    group_offset: int | None
    low: int | None
    high: int | None
    requested: int | None
    target: int | None
    warning: str | None = None


@dataclass(frozen=True)
class ResetPlan:
    """A reviewed-before-executed offset reset: rows for every partition of the job."""

    strategy: ResetStrategy
    scope: Scope
    strict: bool
    rows: tuple[PlannedPartition, ...]

    def changes(self) -> PartitionOffsets:
        """The in-scope partitions and their final targets: what is committed to the group."""
        return {r.partition: r.target for r in self.rows if r.in_scope and r.target is not None}

    def checkpoint_offsets(self) -> PartitionOffsets:
        """The full offsets line to append to the checkpoint (out-of-scope partitions unchanged)."""
        line: PartitionOffsets = {}
        for r in self.rows:
            offset = r.target if r.in_scope else r.checkpoint_offset
            if offset is not None:
                line[r.partition] = offset
        return line

    @property
    def warnings(self) -> list[str]:
        return [f"{r.partition}: {r.warning}" for r in self.rows if r.warning]

    def to_csv(self) -> str:
        """The changes as ``kafka-consumer-groups.sh --reset-offsets --export`` writes them."""
        return render_reset_csv(self.changes())

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy.kind.value,
            "description": self.strategy.description,
            "scope": self.scope.describe(),
            "strict": self.strict,
            "partitions": [
                {
                    "topic": r.partition.topic,
                    "partition": r.partition.partition,
                    "in_scope": r.in_scope,
                    "checkpoint_offset": r.checkpoint_offset,
                    "group_offset": r.group_offset,
                    "low": r.low,
                    "high": r.high,
                    "requested": r.requested,
                    "target": r.target,
                    "warning": r.warning,
                }
                for r in self.rows
            ],
            "warnings": self.warnings,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_table(self) -> str:
        header = ("TOPIC", "PARTITION", "CHECKPOINT", "GROUP", "LOW", "HIGH", "REQUESTED", "NEW-OFFSET", "NOTE")
        rows = [
            (
                r.partition.topic,
                str(r.partition.partition),
                _dash(r.checkpoint_offset),
                _dash(r.group_offset),
                _dash(r.low),
                _dash(r.high),
                _dash(r.requested) if r.in_scope else "-",
                _dash(r.target) if r.in_scope else _dash(r.checkpoint_offset),
                r.warning or ("" if r.in_scope else "out of scope: unchanged"),
            )
            for r in self.rows
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
        lines = [
            ("  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]).rstrip()
            for row in [header, *rows]
        ]
        changed = sum(1 for r in self.rows if r.in_scope and r.target != r.checkpoint_offset)
        lines.append(
            f"reset {self.strategy.description}; scope: {self.scope.describe()}; "
            f"{changed} partition(s) change, {len(self.warnings)} warning(s)"
        )
        return "\n".join(lines)


def plan_reset(strategy: ResetStrategy, scope: Scope, inputs: ResetInputs, *, strict: bool = False) -> ResetPlan:
    """Compute the target of every partition; raise OffsetPlanError for a plan that cannot be made."""
    selected = scope.resolve(inputs.partitions_by_topic)
    if strategy.offsets is not None:
        selected = _listed_partitions(strategy, scope, selected, inputs.partitions_by_topic)
    existing = {TopicPartition(t, p) for t, count in inputs.partitions_by_topic.items() for p in range(count)}
    rows = []
    for tp in sorted(existing | set(inputs.checkpoint)):
        if tp not in existing:
            whole_topic = scope.is_all or (tp.topic in scope.topics and scope.topics[tp.topic] is None)
            rows.append(_gone_row(tp, inputs, in_scope=whole_topic and strategy.offsets is None))
        elif tp in selected:
            rows.append(_planned_row(tp, strategy, inputs, strict))
        else:
            rows.append(_unchanged_row(tp, inputs))
    return ResetPlan(strategy=strategy, scope=scope, strict=strict, rows=tuple(rows))


def _listed_partitions(strategy: ResetStrategy, scope: Scope, selected: set[TopicPartition],
                       partitions_by_topic: Mapping[str, int]) -> set[TopicPartition]:
    listed = set(strategy.offsets or ())
    for tp in sorted(listed):
        count = partitions_by_topic.get(tp.topic)
        if count is None:
            raise OffsetPlanError(
                f"{strategy.kind} sets {tp}, but {tp.topic!r} is not one of the job's topics "
                f"({', '.join(sorted(partitions_by_topic)) or 'none'}); remove that line or fix the topic",
                setting="value"
            )
        if tp.partition >= count:
            raise OffsetPlanError(
                f"{strategy.kind} sets {tp}, but topic {tp.topic!r} has {count} partitions (0..{count - 1}); "
                "remove that line or fix the partition", setting="value"
            )
        if tp not in selected:
            raise OffsetPlanError(
                f"{strategy.kind} sets {tp}, which is outside the scope {scope.describe()!r}; "
                "widen the scope or remove that line", setting=("scope", "value")
            )
    return listed


def _gone_row(tp: TopicPartition, inputs: ResetInputs, in_scope: bool) -> PlannedPartition:
    offset = inputs.checkpoint[tp]
    if in_scope:
        warning = "no longer in the topic (deleted or recreated): dropped from the checkpoint offsets"
        target = None
    else:
        warning = "no longer in the topic; out of scope, kept as is (the restart will fail on it)"
        target = offset
    return PlannedPartition(tp, in_scope, offset, inputs.group.get(tp), None, None, None, target, warning)


def _unchanged_row(tp: TopicPartition, inputs: ResetInputs) -> PlannedPartition:
    low, high = inputs.watermarks.get(tp, (None, None))
    offset = inputs.checkpoint.get(tp)
    return PlannedPartition(tp, False, offset, inputs.group.get(tp), low, high, None, offset)


def _planned_row(tp: TopicPartition, strategy: ResetStrategy, inputs: ResetInputs, strict: bool) -> PlannedPartition:
    if tp not in inputs.watermarks:
        raise OffsetPlanError(f"no watermarks were fetched for {tp}; fetch them for every partition in scope")
    low, high = inputs.watermarks[tp]
    checkpoint = inputs.checkpoint.get(tp)
    requested = _requested(tp, strategy, inputs, checkpoint if checkpoint is not None else low, low, high)
    target, warning = requested, None
    if requested < low or requested > high:
        edge, side, why = (
            (low, "below the low watermark", "older records were deleted" if low > 0 else "the partition starts there")
            if requested < low
            else (high, "above the high watermark", "no record has been written there yet")
        )
        if strict:
            raise OffsetPlanError(
                f"{strategy.kind}: target {requested} for {tp} is {side} {edge} ({why}); choose an offset in "
                f"[{low}, {high}] or plan without strict to clamp it to {edge}", setting=("value", "strict")
            )
        target = edge
        warning = f"requested {requested} is {side} {edge} ({why}); clamped to {edge}"
    if checkpoint is None and warning is None:
        warning = "new partition (not in the checkpoint): added to the checkpoint offsets"
    return PlannedPartition(tp, True, checkpoint, inputs.group.get(tp), low, high, requested, target, warning)


def _requested(tp: TopicPartition, strategy: ResetStrategy, inputs: ResetInputs, base: int, low: int,
               high: int) -> int:
    match strategy.kind:
        case StrategyKind.TO_CURRENT:
            return base
        case StrategyKind.TO_EARLIEST:
            return low
        case StrategyKind.TO_LATEST:
            return high
        case StrategyKind.SHIFT_BY:
            return base + (strategy.shift or 0)
        case StrategyKind.TO_DATETIME | StrategyKind.BY_DURATION:
            if tp not in inputs.timestamp_offsets:
                raise OffsetPlanError(
                    f"no offset was looked up for {tp} at {strategy.timestamp_ms} ms; look up every in-scope "
                    "partition with offsets_for_timestamps before planning"
                )
            return inputs.timestamp_offsets[tp]
        case _ if strategy.offsets is not None:
            return strategy.offsets[tp]
        case _:
            return strategy.offset if strategy.offset is not None else base


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)
