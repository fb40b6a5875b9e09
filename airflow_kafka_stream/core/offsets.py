"""The offsets model shared by every module: Spark's Kafka offsets JSON.

Spark's Kafka source records offsets as ``{"topic": {"0": 23, "1": 31}}``; a
value is the *next* offset to read, which is also what a Kafka committed offset
means, so values move between checkpoint and consumer group unchanged (never
+1). -2 (earliest) and -1 (latest) are only valid in start positions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from airflow_kafka_stream.errors import CheckpointFormatError

EARLIEST = -2
LATEST = -1


class TopicPartition(NamedTuple):
    """A Kafka topic partition; sorts by topic, then partition number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"


#: Offsets per topic partition. Plain dicts keep the model easy to build and compare.
PartitionOffsets = dict[TopicPartition, int]


def records_behind(high: int, offset: int) -> int:
    """The lag of one partition: records after ``offset`` (the next to read) up to ``high`` (its high watermark,
    or the end a batch was planned to). Never negative: a position past the watermark (a truncated or recreated
    topic) is a finding of its own, reported where it is found, not a negative lag."""
    return max(int(high) - int(offset), 0)


def records_read_again(current: Mapping[TopicPartition, int] | None, restored: Mapping[TopicPartition, int]) -> int:
    """Records a job reads a second time when it goes back from ``current`` (where its checkpoint stands) to
    ``restored`` (a savepoint's offsets): each partition's step back, never a step forward."""
    return sum(max(int(current[tp]) - int(offset), 0) for tp, offset in restored.items() if tp in (current or {}))


def parse_offsets_json(text: str | Mapping, *, allow_special: bool = False) -> PartitionOffsets:
    """Parse Spark's Kafka offsets JSON (compact or with spaces) into a mapping.

    Raises CheckpointFormatError naming the problem when the shape is wrong.
    ``allow_special`` admits -2/-1 (start positions); a checkpoint never holds them.
    """
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise CheckpointFormatError(
            f"offsets are not valid JSON ({exc.msg} at position {exc.pos}): {str(text)[:200]!r}; "
            'expected {"topic": {"0": 23}}'
        ) from exc
    if not isinstance(data, Mapping):
        raise CheckpointFormatError(f'offsets must be a JSON object like {{"topic": {{"0": 23}}}}, got {text!r:.200}')
    result: PartitionOffsets = {}
    low = EARLIEST if allow_special else 0
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            raise CheckpointFormatError(
                f'offsets for topic {topic!r} must be an object of partition to offset, got {parts!r:.100}'
            )
        for part, offset in parts.items():
            try:
                partition = int(part)
            except (TypeError, ValueError) as exc:
                raise CheckpointFormatError(f"partition {part!r} of topic {topic!r} is not an integer") from exc
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise CheckpointFormatError(f"offset of {topic}:{partition} must be an integer, got {offset!r}")
            if offset < low or partition < 0:
                allowed = "-2 (earliest), -1 (latest) or >= 0" if allow_special else ">= 0"
                raise CheckpointFormatError(f"offset {offset} of {topic}:{partition} is invalid: must be {allowed}")
            result[TopicPartition(topic, partition)] = offset
    return result


def to_nested(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's nested shape, topics and partitions sorted (partitions numerically)."""
    nested: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return nested


def render_offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    """Render offsets in the compact, sorted form Spark's JVM connector writes."""
    return json.dumps(to_nested(offsets), separators=(",", ":"))


def topics_of(offsets: Iterable[TopicPartition]) -> list[str]:
    """The sorted distinct topics of some partitions."""
    return sorted({tp.topic for tp in offsets})
