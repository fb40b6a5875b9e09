"""Pure planning of what one micro-batch reads: rate limits, range splitting, lost offsets.

Inputs are plain offsets and watermarks; nothing here talks to Kafka or Spark, so the
rules are unit-tested directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, records_behind

#: Ranges one task reads at most when small ranges share tasks (see group_ranges).
MAX_RANGES_PER_TASK = 8


class OffsetRange(NamedTuple):
    """Offsets ``[start, end)`` of one Kafka partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


class LostOffsets(NamedTuple):
    """Offsets a query needs that Kafka no longer has, and where reading can go on."""

    tp: TopicPartition
    start: int
    low: int
    high: int
    reason: str

    @property
    def resume_at(self) -> int:
        return self.low

    def describe(self) -> str:
        return f"{self.tp} needs offset {self.start} but Kafka holds [{self.low}, {self.high}): {self.reason}"


def find_lost_offsets(
    start: Mapping[TopicPartition, int], bounds: Mapping[TopicPartition, tuple[int, int]]
) -> list[LostOffsets]:
    """The partitions whose start offset lies outside Kafka's [low, high] (retention, recreated topic).

    A partition of ``start`` absent from ``bounds`` was deleted.
    """
    lost = []
    for tp in sorted(start):
        offset = start[tp]
        if tp not in bounds:
            lost.append(LostOffsets(tp, offset, 0, 0, "the partition no longer exists (topic deleted?)"))
            continue
        low, high = bounds[tp]
        if offset < low:
            lost.append(LostOffsets(tp, offset, low, high, f"offsets {offset}..{low - 1} were deleted (retention or DeleteRecords)"))
        elif offset > high:
            lost.append(
                LostOffsets(tp, offset, low, high, "the end offset went backwards (topic deleted and recreated?)")
            )
    return lost


def rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], max_records: int
) -> PartitionOffsets:
    """Cap the total of ``end - start`` at ``max_records``, sharing it in proportion to each backlog.

    Largest remainders get the leftover records so the cap is met exactly.
    """
    backlog = {tp: records_behind(end[tp], start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(end)
    shares = {tp: max_records * size / total for tp, size in backlog.items()}
    taken = {tp: math.floor(share) for tp, share in shares.items()}
    leftover = max_records - sum(taken.values())
    by_remainder = sorted(
        (tp for tp in backlog if backlog[tp] > taken[tp]), key=lambda tp: (taken[tp] - shares[tp], tp)
    )
    for tp in by_remainder[:leftover]:
        taken[tp] += 1
    return {tp: start.get(tp, end[tp]) + taken[tp] for tp in end}


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Spark tasks for a batch: one range per non-empty partition, big ones split.

    ``max_records_per_partition`` splits any range above it; ``min_partitions`` then
    splits ranges in proportion to their size until there are at least that many
    (as Spark's KafkaOffsetRangeCalculator does).
    """
    ranges = [OffsetRange(tp.topic, tp.partition, start[tp], end[tp]) for tp in sorted(end) if tp in start]
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        ranges = [piece for r in ranges for piece in _split(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        ranges = [piece for r in ranges for piece in _split(r, max(1, round(r.size / total * min_partitions)))]
    return ranges


def group_ranges(ranges: list[OffsetRange], min_records_per_task: int,
                 task_slots: int | None = None) -> list[tuple[OffsetRange, ...]]:
    """Ranges packed into Spark tasks of about ``min_records_per_task`` records or more each.

    A Python task costs milliseconds before it reads a record (worker, pickled reader,
    Arrow stream), so a small batch read by one task per partition spends most of its time on
    tasks. Large ranges keep a task each; small ones share: ``ceil(total / min_records_per_task)``
    tasks, but no task holds more than MAX_RANGES_PER_TASK ranges (each range opens its own
    consumer, one after another: a wide topic keeps some parallelism), and never more tasks than
    ranges. ``task_slots`` (the cores of a local session, which never change) caps the tasks at one
    per core, so a batch runs in one wave instead of several; a minimum of 1 record asks for a task
    per partition, and gets it even then. Tasks are filled largest range first into the emptiest one.
    """
    if not ranges:
        return []
    total = sum(r.size for r in ranges)
    wanted = math.ceil(total / max(1, min_records_per_task))
    if task_slots and min_records_per_task > 1:
        wanted = min(wanted, task_slots)
    wanted = max(wanted, math.ceil(len(ranges) / MAX_RANGES_PER_TASK))
    count = max(1, min(len(ranges), wanted))
    tasks: list[list[OffsetRange]] = [[] for _ in range(count)]
    loads = [0] * count
    for rng in sorted(ranges, key=lambda r: (-r.size, r.topic, r.partition, r.start)):
        emptiest = loads.index(min(loads))
        tasks[emptiest].append(rng)
        loads[emptiest] += rng.size
    return sorted(tuple(sorted(task)) for task in tasks)


def _split(whole: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, whole.size))
    bounds = [whole.start + whole.size * i // parts for i in range(parts + 1)]
    return [whole._replace(start=bounds[i], end=bounds[i + 1]) for i in range(parts)]
