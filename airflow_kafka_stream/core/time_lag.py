"""A job's lag in seconds, from offsets, watermarks and record timestamps (pure; the looks are the caller's).

A record count means nothing without the topic's rate; the age of the oldest record not processed yet
does. Per partition it is ``now`` minus the Kafka timestamp of the record at the job's next offset (the
checkpoint's committed offset), and 0 when the partition is caught up (the offset is at the high
watermark), or when nothing but transaction markers is left there. It is never "the time since the last
record": an idle, caught-up job has no lag.

The delay of a batch is its commit time minus the newest record's timestamp it held (by offset: the last
record of the batch's range in each partition): how long a record took from its producer to the job's
committed output at that batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition

#: Seconds are kept to the millisecond (Kafka's timestamp resolution).
DIGITS = 3


def lagging(offsets: PartitionOffsets, highs: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """The partitions with records after the job's next offset (those whose record must be looked at).

    A partition without a high watermark (gone) is not one: there is nothing to look at.
    """
    return {tp: offset for tp, offset in offsets.items() if tp in highs and offset < highs[tp]}


def partition_seconds(now_ms: int, offsets: PartitionOffsets, highs: Mapping[TopicPartition, int],
                      timestamps: Mapping[TopicPartition, int | None]) -> dict[TopicPartition, float] | None:
    """Seconds behind per partition; None when a lagging partition was not looked at (no answer for it).

    ``timestamps`` holds the timestamp (ms) of the first record at or after each lagging partition's offset,
    None where there is no record from there (markers only: nothing waits). A record stamped in the future
    (a producer's clock ahead) counts 0. Partitions without a high watermark are left out.
    """
    seconds: dict[TopicPartition, float] = {}
    for tp, offset in sorted(offsets.items()):
        if tp not in highs:
            continue
        if offset >= highs[tp]:
            seconds[tp] = 0.0
            continue
        if tp not in timestamps:
            return None
        stamp = timestamps[tp]
        seconds[tp] = 0.0 if stamp is None else round(max(now_ms - stamp, 0) / 1000, DIGITS)
    return seconds


def batch_delay_seconds(committed_at_ms: int, newest: Mapping[TopicPartition, int | None]) -> float | None:
    """A batch's commit time minus the newest timestamp among its partitions' last records; None without one."""
    stamps = [stamp for stamp in newest.values() if stamp is not None]
    if not stamps:
        return None
    return round(max(committed_at_ms - max(stamps), 0) / 1000, DIGITS)


def batch_ranges(starts: PartitionOffsets | None, ends: PartitionOffsets) -> dict[TopicPartition, tuple[int, int]]:
    """The offset range ``[start, end)`` of each partition a batch read records from (start < end).

    A partition the batch has no start for (new to it) is left out: its range is not known.
    """
    if not starts:
        return {}
    return {tp: (starts[tp], end) for tp, end in sorted(ends.items()) if tp in starts and starts[tp] < end}


def time_lag_document(measured_at: datetime, seconds: Mapping[TopicPartition, float],
                      last_batch_delay_seconds: float | None) -> dict[str, Any]:
    """The status's ``time_lag``: ``{"measured_at", "partitions": {topic: {partition: seconds}}, "max_seconds",
    "last_batch_delay_seconds"}``."""
    partitions: dict[str, dict[str, float]] = {}
    for tp, value in sorted(seconds.items()):
        partitions.setdefault(tp.topic, {})[str(tp.partition)] = value
    return {
        "measured_at": measured_at.isoformat(),
        "partitions": partitions,
        "max_seconds": max(seconds.values(), default=0.0),
        "last_batch_delay_seconds": last_batch_delay_seconds,
    }
