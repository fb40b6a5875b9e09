"""Verification of a job's offsets: checkpoint against consumer group and topic watermarks.

Burrow-evaluator style: every rule is a small function named for what it
detects; a partition's status is the first rule that fires, checked in order of
severity; findings are statuses, not exceptions; the clock is an argument.

The checkpoint is the truth (Spark restarts from it); the group offsets are a
copy committed for monitoring, so every group rule compares against the
checkpoint. A partition listed in the checkpoint but no longer in the topic
(the topic was deleted and recreated with fewer partitions) is reported as
PARTITION_GONE, the most severe status: a restart fails or silently skips it.
STALLED needs the time of the last committed batch; without one (job not
running, no status file) it is not evaluated.

A running job moves on while it is looked at, and its group offsets follow its
checkpoint by design (a batch's offsets are committed to the group after
Spark commits the batch). Read in the order checkpoint, group, checkpoint
again, a healthy job always has ``checkpoint <= group <= checkpoint_later``
but for a group commit still on its way: the group counts as ahead only past
the later read (``checkpoint_later``), as behind only below the first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from airflow_kafka_stream.core.consumer_group import GroupDescription
from airflow_kafka_stream.core.lag_window import WindowVerdict
from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, records_behind
from airflow_kafka_stream.core.output_check import OutputCheck


class Status(StrEnum):
    """Verification statuses, most severe first."""

    PARTITION_GONE = "PARTITION_GONE"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    NEW_PARTITION = "NEW_PARTITION"
    MISSING_IN_GROUP = "MISSING_IN_GROUP"
    GROUP_BEHIND = "GROUP_BEHIND"
    GROUP_AHEAD = "GROUP_AHEAD"
    STALLED = "STALLED"
    OK = "OK"

    @property
    def severity(self) -> int:
        """Higher is worse; OK is 0."""
        return len(_ORDER) - 1 - _ORDER.index(self)


_ORDER = list(Status)


@dataclass(frozen=True)
class PartitionObservation:
    """What was seen for one partition. ``low``/``high`` are None when the topic no longer has it."""

    partition: TopicPartition
    checkpoint_offset: int | None
    group_offset: int | None
    low: int | None
    high: int | None
    #: The checkpoint offset read again after the group's (None: not read again, the job does not run).
    checkpoint_later: int | None = None

    @property
    def in_topic(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def checkpoint_latest(self) -> int | None:
        """The later of the two checkpoint reads (the first when it was read once)."""
        if self.checkpoint_offset is None:
            return None
        return max(self.checkpoint_offset, self.checkpoint_later or self.checkpoint_offset)

    @property
    def group_in_sync(self) -> bool:
        """The group holds the checkpoint's offset, or one the job committed while it was looked at (a partition
        neither has is in sync too)."""
        if self.checkpoint_offset is None or self.group_offset is None:
            return self.group_offset == self.checkpoint_offset
        return self.checkpoint_offset <= self.group_offset <= (self.checkpoint_latest or 0)

    @property
    def lag(self) -> int | None:
        """Records the job has still to read: high watermark minus checkpoint offset."""
        if self.checkpoint_offset is None or self.high is None:
            return None
        return records_behind(self.high, self.checkpoint_offset)


@dataclass(frozen=True)
class Clock:
    """The time facts the STALLED rule needs (passed in, never read from the system)."""

    now: datetime
    last_batch_at: datetime | None
    stall_after: timedelta


Rule = Callable[[PartitionObservation, Clock], str | None]


# 1. A partition in the checkpoint that the topic no longer has cannot be resumed.
def partition_gone(p: PartitionObservation, _clock: Clock) -> str | None:
    if p.checkpoint_offset is not None and not p.in_topic:
        return (
            f"checkpoint resumes {p.partition} at {p.checkpoint_offset} but the topic has no such partition "
            "(deleted or recreated); reset the job's offsets or start a fresh checkpoint"
        )
    return None


# 2. A checkpoint offset outside [low, high] loses data on restart (below) or means the topic was recreated (above).
def out_of_range(p: PartitionObservation, _clock: Clock) -> str | None:
    if p.checkpoint_offset is None or not p.in_topic:
        return None
    if p.checkpoint_offset < p.low:
        return (
            f"checkpoint offset {p.checkpoint_offset} is below the low watermark {p.low}: "
            f"{p.low - p.checkpoint_offset} records were deleted before the job read them; a restart loses them"
        )
    if p.checkpoint_offset > p.high:
        return (
            f"checkpoint offset {p.checkpoint_offset} is above the high watermark {p.high}: "
            "the topic was probably recreated; reset the offsets (e.g. to-earliest) before restarting"
        )
    return None


# 3. A partition in the topic but not in the checkpoint was added after the checkpoint was written.
def new_partition(p: PartitionObservation, _clock: Clock) -> str | None:
    if p.checkpoint_offset is None and p.in_topic:
        return "partition is in the topic but not in the checkpoint; the job starts it from the earliest offset"
    return None


# 4. A checkpointed partition without a group commit means commits never reached the group for it.
def missing_in_group(p: PartitionObservation, _clock: Clock) -> str | None:
    if p.checkpoint_offset is not None and p.group_offset is None:
        return "the consumer group has no committed offset for this partition; group-based lag monitoring is blind"
    return None


# 5. A group offset behind the checkpoint means commits are failing or late.
def group_behind(p: PartitionObservation, _clock: Clock) -> str | None:
    if p.checkpoint_offset is not None and p.group_offset is not None and p.group_offset < p.checkpoint_offset:
        return (
            f"group offset {p.group_offset} is {p.checkpoint_offset - p.group_offset} behind the checkpoint "
            f"{p.checkpoint_offset}: offset commits are failing or late"
        )
    return None


# 6. A group offset ahead of the checkpoint means another consumer uses the group, or a reset only moved the group.
def group_ahead(p: PartitionObservation, _clock: Clock) -> str | None:
    # A batch the job committed between the two checkpoint reads may already be in the group: not ahead.
    latest = p.checkpoint_latest
    if latest is not None and p.group_offset is not None and p.group_offset > latest:
        return (
            f"group offset {p.group_offset} is {p.group_offset - latest} ahead of the checkpoint "
            f"{latest}: another consumer uses this group, or a reset moved only the group "
            "(reset to-current makes the group agree with the checkpoint)"
        )
    return None


# 7. Lag with no batch committed for longer than the threshold is a job that runs but consumes nothing.
def stalled(p: PartitionObservation, clock: Clock) -> str | None:
    if clock.last_batch_at is None or not p.lag:
        return None
    idle = clock.now - clock.last_batch_at
    if idle > clock.stall_after:
        return (
            f"lag {p.lag} and no batch committed for {_seconds(idle)} (threshold {_seconds(clock.stall_after)}): "
            "the job runs but consumes nothing"
        )
    return None


#: The rules in order of severity; a partition's status is the first that fires.
RULES: tuple[tuple[Status, Rule], ...] = (
    (Status.PARTITION_GONE, partition_gone),
    (Status.OUT_OF_RANGE, out_of_range),
    (Status.NEW_PARTITION, new_partition),
    (Status.MISSING_IN_GROUP, missing_in_group),
    (Status.GROUP_BEHIND, group_behind),
    (Status.GROUP_AHEAD, group_ahead),
    (Status.STALLED, stalled),
)


@dataclass(frozen=True)
class PartitionVerdict:
    """One partition's observation, its status and why."""

    observation: PartitionObservation
    status: Status
    detail: str

    @property
    def partition(self) -> TopicPartition:
        return self.observation.partition


@dataclass(frozen=True)
class VerifyResult:
    """Per-partition verdicts plus the overall status (the most severe one)."""

    partitions: tuple[PartitionVerdict, ...]
    checked_at: datetime
    last_batch_at: datetime | None
    group: str | None = None
    note: str | None = None  # what the caller wants a reader to know first (e.g. the generation has not started)
    #: Seconds behind per partition (ops.time_lag: now minus the timestamp of the record at the checkpoint offset,
    #: 0 when caught up); None when not measured.
    time_lag_seconds: Mapping[TopicPartition, float] | None = None
    #: Burrow's window rules over the group's recent looks (core.lag_window); None when not judged.
    window: WindowVerdict | None = None
    #: The group as its coordinator described it (state, protocol, members); None when not looked at.
    group_description: GroupDescription | None = None
    #: The transactional Kafka sink's output topic: an open transaction on it (core.output_check); None otherwise.
    output: OutputCheck | None = None

    @property
    def status(self) -> Status:
        return max((v.status for v in self.partitions), key=lambda s: s.severity, default=Status.OK)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def exit_code(self) -> int:
        """0 when every partition is OK, 1 when any has a problem or the window says REWIND or STOP (a
        WARN is a warning: 0)."""
        problem = (self.window and self.window.status.is_problem) or (self.output and self.output.problem)
        return 0 if self.ok and not problem else 1

    @property
    def total_lag(self) -> int:
        return sum(v.observation.lag or 0 for v in self.partitions)

    def problems(self) -> list[PartitionVerdict]:
        return [v for v in self.partitions if v.status is not Status.OK]

    def to_dict(self) -> dict:
        return {
            "status": self.status.value,
            "group": self.group,
            "checked_at": self.checked_at.isoformat(),
            "last_batch_at": self.last_batch_at.isoformat() if self.last_batch_at else None,
            "total_lag": self.total_lag,
            "note": self.note,
            "partitions": [
                {
                    "topic": v.partition.topic,
                    "partition": v.partition.partition,
                    "checkpoint_offset": v.observation.checkpoint_offset,
                    "group_offset": v.observation.group_offset,
                    "group_in_sync": v.observation.group_in_sync,
                    "low": v.observation.low,
                    "high": v.observation.high,
                    "lag": v.observation.lag,
                    **({"time_lag_seconds": self.time_lag_seconds.get(v.partition)}
                       if self.time_lag_seconds is not None else {}),
                    "status": v.status.value,
                    "detail": v.detail,
                }
                for v in self.partitions
            ],
            **({"window": self.window.to_dict()} if self.window is not None else {}),
            **({"group_description": self.group_description.to_dict()} if self.group_description is not None
               else {}),
            **({"output": self.output.to_dict()} if self.output is not None else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def observe(
    checkpoint: PartitionOffsets,
    group: Mapping[TopicPartition, int | None],
    watermarks: Mapping[TopicPartition, tuple[int, int]],
    checkpoint_later: PartitionOffsets | None = None,
) -> list[PartitionObservation]:
    """Combine raw lookups into one observation per partition (topic partitions plus checkpoint partitions).

    ``watermarks`` must hold every partition the topics have: it is how the topic's partitions are known.
    ``checkpoint_later`` is the checkpoint read again after the group, when the job runs.
    """
    partitions = sorted(set(watermarks) | set(checkpoint))
    later = checkpoint_later or {}
    return [
        PartitionObservation(
            partition=tp,
            checkpoint_offset=checkpoint.get(tp),
            group_offset=group.get(tp),
            low=watermarks[tp][0] if tp in watermarks else None,
            high=watermarks[tp][1] if tp in watermarks else None,
            checkpoint_later=later.get(tp),
        )
        for tp in partitions
    ]


def evaluate(
    observations: Iterable[PartitionObservation],
    *,
    now: datetime,
    last_batch_at: datetime | None = None,
    stall_after: timedelta = timedelta(minutes=15),
    group: str | None = None,
) -> VerifyResult:
    """Apply the rules to every observation; never raises for findings."""
    clock = Clock(now=now, last_batch_at=last_batch_at, stall_after=stall_after)
    verdicts = tuple(_verdict(p, clock) for p in sorted(observations, key=lambda o: o.partition))
    return VerifyResult(partitions=verdicts, checked_at=now, last_batch_at=last_batch_at, group=group)


def _verdict(p: PartitionObservation, clock: Clock) -> PartitionVerdict:
    for status, rule in RULES:
        detail = rule(p, clock)
        if detail is not None:
            return PartitionVerdict(p, status, detail)
    return PartitionVerdict(p, Status.OK, "")


def _seconds(delta: timedelta) -> str:
    return f"{int(delta.total_seconds())}s"
