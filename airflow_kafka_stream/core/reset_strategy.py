"""Reset strategies, named as in ``kafka-consumer-groups.sh --reset-offsets``, and the rules of their values.

:class:`StrategyKind` is the one list of strategies: each member says whether it
takes a value, what kind of value, and what it means. The CLI's strategy options
and the reset operator's ``strategy`` parameter are derived from it
(:meth:`StrategyKind.choices`), so a strategy added here is offered everywhere.

A strategy's value is text as a user writes it: an offset or offsets JSON for
to-offset, a whole number for shift-by, a date-time for to-datetime, a duration
for by-duration, CSV text for from-file, a savepoint id for to-savepoint and
offsets JSON for to-recorded. :func:`parse_strategy` turns text into a
:class:`ResetStrategy`; the values that need I/O (a CSV file's path, a
savepoint's manifest) are read by the operation (``ops/reset.py``) first.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from airflow_kafka_stream.core.durations import parse_duration
from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, parse_offsets_json
from airflow_kafka_stream.core.reset_csv import parse_reset_csv
from airflow_kafka_stream.errors import CheckpointFormatError, OffsetPlanError

# Lazy imports: pendulum (about 15 ms) waits for a date-time to parse: the command line builds its parser from
# this module.

if TYPE_CHECKING:
    import pendulum


class ValueKind(StrEnum):
    """What a strategy's value is."""

    NONE = "none"  # the strategy takes no value
    INTEGER = "integer"  # a signed whole number
    TEXT = "text"  # text the strategy parses (an offset, a date-time, a duration, a path or an id)


class StrategyKind(StrEnum):
    """Reset strategies: kafka-consumer-groups.sh's, a savepoint's offsets, and a recorded position.

    Each member carries its value rule: ``value_kind``, ``summary`` (what it resets to) and
    ``value_hint`` (the value it needs, as a refusal words it).
    """

    value_kind: ValueKind
    summary: str
    value_hint: str

    TO_CURRENT = ("to-current", ValueKind.NONE, "the checkpoint's position (aligns the group)", "")
    TO_OFFSET = ("to-offset", ValueKind.TEXT,
                 "an offset for every partition in scope, or topic:partition=offset,...",
                 'an offset like 42, or per-partition offsets like {"orders":{"0":42}}')
    TO_DATETIME = ("to-datetime", ValueKind.TEXT, "ISO 8601 time with a zone, e.g. 2026-11-22T10:00:00+01:00",
                   "a date-time like 2024-05-01T12:00:00Z")
    TO_EARLIEST = ("to-earliest", ValueKind.NONE, "the low watermark", "")
    TO_LATEST = ("to-latest", ValueKind.NONE, "the high watermark", "")
    SHIFT_BY = ("shift-by", ValueKind.INTEGER, "move by N (negative goes back)",
                "a signed number of records like -100")
    BY_DURATION = ("by-duration", ValueKind.TEXT, "ISO 8601 duration back from now, e.g. PT1H",
                   "an ISO 8601 duration like PT1H or P1DT2H")
    FROM_FILE = ("from-file", ValueKind.TEXT, "CSV topic,partition,offset (as a dry run's export writes it)",
                 "the CSV text of topic,partition,offset lines")
    TO_SAVEPOINT = ("to-savepoint", ValueKind.TEXT, "the offsets recorded in a savepoint of this job",
                    "the id of one of the job's savepoints")
    TO_RECORDED = ("to-recorded", ValueKind.TEXT, "a position recorded earlier, as offsets JSON",
                   'offsets JSON like {"orders":{"0":42}}')

    def __new__(cls, value: str, value_kind: ValueKind, summary: str, value_hint: str) -> StrategyKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.value_kind = value_kind
        member.summary = summary
        member.value_hint = value_hint
        return member

    @property
    def takes_value(self) -> bool:
        return self.value_kind is not ValueKind.NONE

    @property
    def user_choice(self) -> bool:
        """Whether a user names this strategy (to-recorded is built by the operations, e.g. an upgrade's rollback)."""
        return self is not StrategyKind.TO_RECORDED

    @classmethod
    def choices(cls) -> tuple[StrategyKind, ...]:
        """The strategies a user chooses from, in the order the CLI and the DAG params list them."""
        return tuple(kind for kind in cls if kind.user_choice)


def strategy_kind(text: str | StrategyKind, *, user: bool = False) -> StrategyKind:
    """The strategy ``text`` names (``to-offset``, ``--to-offset``, any case); ``user`` refuses the internal ones."""
    if isinstance(text, StrategyKind) and (text.user_choice or not user):
        return text
    allowed = StrategyKind.choices() if user else tuple(StrategyKind)
    name = str(text or "").strip().lower().removeprefix("--")
    found = next((kind for kind in allowed if kind.value == name), None)
    if found is None:
        raise OffsetPlanError(
            f"unknown reset strategy {str(text)!r}; use one of {', '.join(k.value for k in allowed)}",
            setting="strategy"
        )
    return found


def check_value(kind: StrategyKind, value: object) -> str:
    """The value's text; refused when the strategy needs one and none is given, or takes none and one is."""
    text = "" if value is None else str(value).strip()
    if kind.takes_value and not text:
        raise OffsetPlanError(f"reset strategy {kind} needs a value ({kind.value_hint})", setting="value")
    if not kind.takes_value and text:
        raise OffsetPlanError(f"reset strategy {kind} takes no value, got {text!r}", setting="value")
    return text


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


def parse_strategy(kind: str | StrategyKind, value: str | None = None, *, now: datetime | None = None,
                   timezone: str | None = None) -> ResetStrategy:
    """Build a strategy from text, as the CLI and Airflow params give it.

    ``value`` is: an offset (or offsets JSON ``{"t":{"0":5}}``) for to-offset, a number for
    shift-by, a date-time for to-datetime, a duration for by-duration, the CSV text for
    from-file, offsets JSON for to-recorded, and nothing for the others. A to-savepoint
    strategy is resolved by the operation, which reads the savepoint (``ops.reset.build_strategy``).
    """
    strategy = strategy_kind(kind)
    text = check_value(strategy, value)
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
        case StrategyKind.TO_SAVEPOINT:
            raise OffsetPlanError(
                f"to-savepoint {text!r} is resolved from the savepoint's manifest in the job home; give the job "
                "home, or the savepoint's offsets with to-recorded", setting=("job_home", "strategy")
            )
        case StrategyKind.TO_RECORDED:
            return ResetStrategy.to_recorded(_offsets_json(text, strategy))
    raise AssertionError(strategy)  # pragma: no cover - every kind is matched above


_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_DATE_FIRST = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}.*)?$")


def _parse_int(text: str, kind: StrategyKind) -> int:
    if not _INTEGER.match(text):
        raise OffsetPlanError(f"{kind} value {text!r} is not a whole number ({kind.value_hint})", setting="value")
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
    import pendulum

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


def _epoch_ms(when: datetime) -> int:
    # calendar.timegm keeps the arithmetic exact and in the standard library (pendulum's intervals differ).
    millis = calendar.timegm(when.utctimetuple()) * 1000 + when.microsecond // 1000
    if millis < 0:
        raise OffsetPlanError(f"time {when.isoformat()} is before 1970; Kafka timestamps start at the epoch",
                              setting="value")
    return millis
