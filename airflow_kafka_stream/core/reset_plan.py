"""Offset reset planning, with the strategies of ``kafka-consumer-groups.sh --reset-offsets``.

A plan is a value computed from values passed in (checkpoint and group offsets,
watermarks, offsets already looked up for a time); it does no I/O, so it can be
printed, exported and reviewed before anything executes it. The strategies and
their values are in ``core/reset_strategy.py``, the scope in ``core/reset_scope.py``;
the text of a plan is rendered outside core (``render/reset.py``).

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

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, records_read_again
from airflow_kafka_stream.core.reset_csv import render_reset_csv
from airflow_kafka_stream.core.reset_scope import Scope
from airflow_kafka_stream.core.reset_strategy import ResetStrategy, StrategyKind
from airflow_kafka_stream.errors import OffsetPlanError


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

    def read_again(self) -> int:
        """Records the job reads again after the reset: each in-scope partition moved back, from its new offset to
        where the checkpoint stood. A sink that appends (the transactional Kafka sink) writes them again."""
        moved = [r for r in self.rows if r.in_scope and r.target is not None and r.checkpoint_offset is not None]
        return records_read_again({r.partition: r.checkpoint_offset for r in moved},
                                  {r.partition: r.target for r in moved})

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
            "records_read_again": self.read_again(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def plan_reset(strategy: ResetStrategy, scope: Scope, inputs: ResetInputs, *, strict: bool = False) -> ResetPlan:
    """Compute the target of every partition; raise OffsetPlanError for a plan that cannot be made."""
    selected = scope.resolve(inputs.partitions_by_topic)
    if strategy.offsets is not None:
        selected = _listed_partitions(strategy, scope, selected, inputs.partitions_by_topic)
    existing = {TopicPartition(t, p) for t, count in inputs.partitions_by_topic.items() for p in range(count)}
    rows = []
    for tp in sorted(existing | set(inputs.checkpoint)):
        if tp not in existing:
            rows.append(_gone_row(tp, inputs, in_scope=scope.whole_topic(tp.topic) and strategy.offsets is None))
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

