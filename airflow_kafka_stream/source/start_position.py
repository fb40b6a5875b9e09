"""Where a query that has no checkpoint yet starts: ``startingOffsets`` and its timestamp forms, resolved against
the partitions' watermarks (and, for ``group``, the consumer group's committed offsets)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from airflow_kafka_stream.core.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka import metadata
from airflow_kafka_stream.source.source_options import SourceOptions
from airflow_kafka_stream.source.subscription import (
    START_EARLIEST,
    START_GROUP,
    START_LATEST,
    START_OFFSETS,
    START_TIMESTAMP,
)

log = logging.getLogger(__name__)


def resolve_start(options: SourceOptions, client_config: Mapping[str, object], partitions: list[TopicPartition],
                  bounds: Mapping[TopicPartition, tuple[int, int]]) -> PartitionOffsets:
    """Where a fresh query starts in each partition, from ``startingOffsets`` (or its timestamp forms) and the
    partitions' watermarks ``bounds``."""
    starting = options.starting
    low = {tp: bounds[tp][0] for tp in partitions}
    high = {tp: bounds[tp][1] for tp in partitions}
    if starting.kind == START_EARLIEST:
        return low
    if starting.kind == START_LATEST:
        return high
    if starting.kind == START_GROUP:
        committed = metadata.committed_offsets(client_config, options.group_id or "", partitions)
        fallback = low if starting.group_fallback == EARLIEST else high
        missing = [tp for tp in partitions if committed[tp] is None]
        if missing:
            log.info(
                "group %s has no committed offset for %s: starting them at %s",
                options.group_id,
                ", ".join(map(str, missing)),
                "earliest" if starting.group_fallback == EARLIEST else "latest",
            )
        return {tp: fallback[tp] if committed[tp] is None else committed[tp] for tp in partitions}
    if starting.kind == START_OFFSETS:
        _require_all(partitions, starting.offsets, "startingOffsets")
        special = {EARLIEST: low, LATEST: high}
        return {tp: special[o][tp] if o in special else o for tp, o in starting.offsets.items()}
    if starting.kind == START_TIMESTAMP:
        wanted = dict.fromkeys(partitions, starting.timestamp)
    else:
        _require_all(partitions, starting.timestamps, "startingOffsetsByTimestamp")
        wanted = dict(starting.timestamps)
    found = metadata.offsets_for_timestamps(client_config, wanted)
    unmatched = [tp for tp in partitions if found[tp] >= high[tp]]
    if unmatched and starting.timestamp_strategy == "error":
        raise InvalidInputError(
            "no record at or after the starting timestamp in "
            + ", ".join(f"{tp} (timestamp {wanted[tp]})" for tp in unmatched)
            + "; choose an earlier time, or set startingOffsetsByTimestampStrategy=latest to start these "
            "partitions at their end"
        )
    return {tp: min(found[tp], high[tp]) for tp in partitions}


def _require_all(partitions: list[TopicPartition], given: Mapping[TopicPartition, int], option: str) -> None:
    missing = [tp for tp in partitions if tp not in given]
    unknown = [tp for tp in given if tp not in set(partitions)]
    if missing or unknown:
        problems = []
        if missing:
            problems.append(f"it lacks {', '.join(map(str, missing))}")
        if unknown:
            problems.append(f"{', '.join(map(str, unknown))} do not exist")
        raise InvalidInputError(
            f"option {option} must give every partition the query reads: {'; '.join(problems)} "
            "(use -2 for earliest, -1 for latest in startingOffsets)"
        )
