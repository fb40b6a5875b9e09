"""Fetch what verification and reset planning need, in a fixed number of broker requests.

Observe, then decide: these functions only read from Kafka and hand values to
the pure evaluators in ``core/verify.py`` and ``core/reset_plan.py``. The
request count does not grow with the number of partitions: one topic listing,
batched watermarks, one group offset fetch (and for verification one
description of the group, for its members), and for time-based resets one
batched offsets-for-times lookup.

The job's topics are the ones it subscribes to plus any its checkpoint names.
A subscribed topic missing from the cluster is an error (nothing to verify or
reset); a checkpoint topic or partition missing from the cluster is a finding
(PARTITION_GONE in verification, dropped in a reset plan).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition
from airflow_kafka_stream.core.reset_plan import ResetInputs, ResetPlan, plan_reset
from airflow_kafka_stream.core.reset_scope import Scope
from airflow_kafka_stream.core.reset_strategy import ResetStrategy
from airflow_kafka_stream.core.verify import VerifyResult, evaluate, observe
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.groups import describe_group
from airflow_kafka_stream.kafka.metadata import (
    committed_offsets,
    list_topic_partitions,
    offsets_for_timestamps,
    watermarks,
)


@dataclass(frozen=True)
class VerifyInputs:
    """The Kafka side of a verification: existing partitions, group offsets, watermarks."""

    partitions_by_topic: dict[str, int]
    group_offsets: dict[TopicPartition, int | None]
    watermarks: dict[TopicPartition, tuple[int, int]]


def _existing_partitions(
    config: Mapping[str, object], checkpoint_offsets: Mapping[TopicPartition, int], topics: Iterable[str],
    timeout: float,
) -> dict[str, int]:
    """Partition counts of the job's topics that exist; refuse subscribed topics that do not."""
    subscribed = set(topics)
    available = list_topic_partitions(config, timeout=timeout)
    missing = sorted(t for t in subscribed if t not in available and t not in {tp.topic for tp in checkpoint_offsets})
    if missing:
        raise InvalidInputError(
            f"the job's topic(s) {', '.join(missing)} do not exist at {config.get('bootstrap.servers')} and its "
            "checkpoint does not name them; fix the job's topics or create the topics"
        )
    wanted = subscribed | {tp.topic for tp in checkpoint_offsets}
    return {t: available[t] for t in sorted(wanted) if t in available}


def _partitions(partitions_by_topic: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, count in partitions_by_topic.items() for p in range(count)]


def collect_verify_inputs(
    config: Mapping[str, object],
    group: str,
    checkpoint_offsets: Mapping[TopicPartition, int],
    topics: Iterable[str],
    timeout: float = 10.0,
) -> VerifyInputs:
    """Read partition counts, watermarks and the group's offsets for the job's topics."""
    partitions_by_topic = _existing_partitions(config, checkpoint_offsets, topics, timeout)
    partitions = _partitions(partitions_by_topic)
    return VerifyInputs(
        partitions_by_topic=partitions_by_topic,
        group_offsets=committed_offsets(config, group, partitions, timeout, known_to_exist=True) if partitions else {},
        watermarks=watermarks(config, partitions, timeout),
    )


def verify_job(
    config: Mapping[str, object],
    group: str,
    checkpoint_offsets: Mapping[TopicPartition, int],
    topics: Iterable[str],
    *,
    now: datetime,
    last_batch_at: datetime | None = None,
    stall_after: timedelta = timedelta(minutes=15),
    timeout: float = 10.0,
    checkpoint_later: Callable[[], Mapping[TopicPartition, int]] | None = None,
) -> VerifyResult:
    """Verify a job's checkpoint offsets against its consumer group and the topic watermarks.

    ``checkpoint_later`` reads the checkpoint again; it is called after the group's offsets are read (a
    running job commits batches while it is looked at, see core/verify.py).
    """
    inputs = collect_verify_inputs(config, group, checkpoint_offsets, topics, timeout)
    later = dict(checkpoint_later()) if checkpoint_later is not None else None
    observations = observe(dict(checkpoint_offsets), inputs.group_offsets, inputs.watermarks, later)
    result = evaluate(observations, now=now, last_batch_at=last_batch_at, stall_after=stall_after, group=group)
    # Who else consumes with the group id: the job never joins its group, so any member is another consumer.
    return replace(result, group_description=describe_group(config, group, timeout))


def collect_reset_inputs(
    config: Mapping[str, object],
    group: str | None,
    checkpoint_offsets: Mapping[TopicPartition, int],
    topics: Iterable[str],
    strategy: ResetStrategy,
    scope: Scope,
    timeout: float = 10.0,
) -> ResetInputs:
    """Read what :func:`plan_reset` needs; look up offsets for the strategy's time, if it has one.

    The scope is checked against the topics before the time lookup, so a typo
    costs no lookups. Without a group, group offsets are shown as unknown.
    """
    partitions_by_topic = _existing_partitions(config, checkpoint_offsets, topics, timeout)
    partitions = _partitions(partitions_by_topic)
    timestamp_offsets: PartitionOffsets = {}
    timed = sorted(scope.resolve(partitions_by_topic)) if strategy.timestamp_ms is not None else []
    # Watermarks first: the time lookup takes its high watermarks from them instead of asking again.
    marks = watermarks(config, partitions, timeout)
    if timed:
        timestamp_offsets = offsets_for_timestamps(config, dict.fromkeys(timed, strategy.timestamp_ms), timeout,
                                                   ends={tp: marks[tp][1] for tp in timed})
    return ResetInputs(
        partitions_by_topic=partitions_by_topic,
        checkpoint=dict(checkpoint_offsets),
        group=(committed_offsets(config, group, partitions, timeout, known_to_exist=True)
               if group and partitions else {}),
        watermarks=marks,
        timestamp_offsets=timestamp_offsets,
    )


def plan_job_reset(
    config: Mapping[str, object],
    group: str | None,
    checkpoint_offsets: Mapping[TopicPartition, int],
    topics: Iterable[str],
    strategy: ResetStrategy,
    scope: Scope,
    *,
    strict: bool = False,
    timeout: float = 10.0,
) -> ResetPlan:
    """Collect the inputs and plan the reset (nothing is changed)."""
    inputs = collect_reset_inputs(config, group, checkpoint_offsets, topics, strategy, scope, timeout)
    return plan_reset(strategy, scope, inputs, strict=strict)
