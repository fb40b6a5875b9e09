"""Which partitions a ``kafka_stream`` query reads, and where a query without a checkpoint starts.

The ``subscribe``/``subscribePattern``/``assign`` options and the start options
(``startingOffsets``, ``startingOffsetsByTimestamp``, ``startingTimestamp`` and their
fallback and strategy), parsed and checked against each other; see
:mod:`airflow_kafka_stream.source.source_options` for every option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_kafka_stream.core.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition, parse_offsets_json
from airflow_kafka_stream.errors import CheckpointFormatError, InvalidInputError
from airflow_kafka_stream.source.option_values import text

SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
ASSIGN = "assign"

# Start position kinds.
START_EARLIEST = "earliest"
START_LATEST = "latest"
START_GROUP = "group"
START_OFFSETS = "offsets"
START_TIMESTAMP = "timestamp"
START_TIMESTAMPS = "timestamps"


@dataclass(frozen=True)
class Subscription:
    """Which partitions the query reads: a topic list, a pattern, or fixed partitions."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.kind == SUBSCRIBE:
            return f"subscribe={','.join(self.topics)}"
        if self.kind == SUBSCRIBE_PATTERN:
            return f"subscribePattern={self.pattern}"
        return f"assign={', '.join(map(str, self.partitions))}"

    def covers_topic(self, topic: str) -> bool:
        if self.kind == SUBSCRIBE:
            return topic in self.topics
        if self.kind == SUBSCRIBE_PATTERN:
            return re.fullmatch(self.pattern or "", topic) is not None
        return any(tp.topic == topic for tp in self.partitions)


@dataclass(frozen=True)
class StartingPosition:
    """Where a fresh query starts; ``offsets``/``timestamps`` hold the per-partition forms."""

    kind: str
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: PartitionOffsets = field(default_factory=dict)
    group_fallback: int = EARLIEST
    timestamp_strategy: str = "error"


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN) if text(opts, name) is not None]
    if len(given) != 1:
        found = f"got {', '.join(given)}" if given else "got none"
        raise InvalidInputError(
            f"exactly one of the options subscribe, subscribePattern and assign must be set ({found}); "
            'e.g. .option("subscribe", "orders,payments")'
        )
    kind = given[0]
    value = text(opts, kind) or ""
    if kind == SUBSCRIBE:
        topics = tuple(sorted({t.strip() for t in value.split(",") if t.strip()}))
        if not topics:
            raise InvalidInputError(f"option subscribe must list topic names separated by commas, got {value!r}")
        return Subscription(SUBSCRIBE, topics=topics)
    if kind == SUBSCRIBE_PATTERN:
        try:
            re.compile(value)
        except re.error as exc:
            raise InvalidInputError(
                f"option subscribePattern {value!r} is not a valid regular expression: {exc}"
            ) from exc
        return Subscription(SUBSCRIBE_PATTERN, pattern=value)
    return Subscription(ASSIGN, partitions=_assignment(value))


def _assignment(value: str) -> tuple[TopicPartition, ...]:
    example = 'e.g. {"orders": [0, 1], "payments": [0]}'
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"option assign is not valid JSON ({exc.msg}): {value!r}; {example}") from exc
    if not isinstance(data, dict) or not data:
        raise InvalidInputError(
            f"option assign must be a JSON object of topic to partition list, got {value!r}; {example}"
        )
    partitions = set()
    for topic, parts in data.items():
        if not isinstance(parts, list) or not parts or not all(_is_count(p) for p in parts):
            raise InvalidInputError(
                f"option assign: partitions of topic {topic!r} must be a non-empty list of integers >= 0, got {parts!r}"
            )
        partitions.update(TopicPartition(topic, p) for p in parts)
    return tuple(sorted(partitions))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_starting(opts: Mapping[str, str], subscription: Subscription, group_id: str | None) -> StartingPosition:
    strategy = (text(opts, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise InvalidInputError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")
    fallback_text = (text(opts, "startingOffsetsGroupFallback") or "earliest").lower()
    if fallback_text not in ("earliest", "latest"):
        raise InvalidInputError(
            f"option startingOffsetsGroupFallback must be earliest or latest, got {fallback_text!r}"
        )
    fallback = EARLIEST if fallback_text == "earliest" else LATEST

    timestamp = text(opts, "startingTimestamp")
    if timestamp is not None:
        return StartingPosition(
            START_TIMESTAMP, timestamp=_millis("startingTimestamp", timestamp), timestamp_strategy=strategy
        )
    by_timestamp = text(opts, "startingOffsetsByTimestamp")
    if by_timestamp is not None:
        stamps = _partition_json("startingOffsetsByTimestamp", by_timestamp, subscription, allow_special=False)
        return StartingPosition(START_TIMESTAMPS, timestamps=stamps, timestamp_strategy=strategy)
    starting = text(opts, "startingOffsets") or "latest"
    if starting.lower() == "earliest":
        return StartingPosition(START_EARLIEST)
    if starting.lower() == "latest":
        return StartingPosition(START_LATEST)
    if starting.lower() == "group":
        if not group_id:
            raise InvalidInputError(
                "startingOffsets=group needs a consumer group: set the option groupId or kafka.group.id"
            )
        return StartingPosition(START_GROUP, group_fallback=fallback)
    if not starting.startswith("{"):
        raise InvalidInputError(
            f"option startingOffsets must be earliest, latest, group or JSON like "
            f'{{"topic": {{"0": 23, "1": -2}}}}, got {starting!r}'
        )
    return StartingPosition(
        START_OFFSETS, offsets=_partition_json("startingOffsets", starting, subscription, allow_special=True)
    )


def _millis(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise InvalidInputError(
            f"option {name} must be epoch milliseconds (an integer like 1700000000000, which carries no time "
            f"zone ambiguity), got {value!r}"
        )
    return number


def _partition_json(name: str, text: str, subscription: Subscription, allow_special: bool) -> PartitionOffsets:
    try:
        values = parse_offsets_json(text, allow_special=allow_special)
    except CheckpointFormatError as exc:
        raise InvalidInputError(f"option {name}: {exc}") from exc
    if not values:
        raise InvalidInputError(f'option {name} names no partition; give e.g. {{"topic": {{"0": 23}}}}')
    stray = sorted({tp.topic for tp in values if not subscription.covers_topic(tp.topic)})
    if stray:
        raise InvalidInputError(
            f"option {name} names topic(s) {', '.join(stray)} that {subscription.describe()} does not read; "
            "remove them or fix the subscription"
        )
    if subscription.kind == ASSIGN:
        assigned = set(subscription.partitions)
        missing = sorted(assigned - set(values))
        extra = sorted(set(values) - assigned)
        if missing or extra:
            raise InvalidInputError(
                f"option {name} must name exactly the assigned partitions: "
                + "; ".join(
                    part
                    for part in (
                        f"missing {', '.join(map(str, missing))}" if missing else "",
                        f"not assigned {', '.join(map(str, extra))}" if extra else "",
                    )
                    if part
                )
            )
    return values
