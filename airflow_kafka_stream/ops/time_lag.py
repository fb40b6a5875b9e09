"""A job's lag in seconds seen from outside the driver: verify's TIME LAG column, the health look's samples.

The driver measures its own time lag (``runtime/time_lag.py``, the status's ``time_lag``); verify runs
where no driver is, so it measures the same thing from the checkpoint's offsets with the same Kafka read
(``kafka.record_times``): now minus the timestamp of the first record at or after each partition's
checkpoint offset, 0 when the partition is caught up. A look Kafka does not answer is left out (logged):
the column is simply not shown, verify's verdicts do not depend on it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition
from airflow_kafka_stream.core.time_lag import lagging, partition_seconds
from airflow_kafka_stream.core.verify import VerifyResult
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.kafka.record_times import record_timestamps

log = logging.getLogger(__name__)


def seconds_behind(kafka_config: Mapping[str, Any], offsets: PartitionOffsets, highs: Mapping[TopicPartition, int],
                   now: datetime) -> dict[TopicPartition, float] | None:
    """Seconds behind per partition at ``now`` for the next offsets ``offsets``; None when Kafka did not answer."""
    waiting = lagging(offsets, highs)
    try:
        stamps = record_timestamps(dict(kafka_config), waiting) if waiting else {}
    except StreamError as exc:
        log.warning("the time lag could not be measured: %s", exc)
        return None
    return partition_seconds(int(now.timestamp() * 1000), offsets, highs, stamps)


def with_time_lag(kafka_config: Mapping[str, Any] | None, result: VerifyResult, now: datetime) -> VerifyResult:
    """``result`` with each partition's time lag (``time_lag_seconds``) from its checkpoint offset, when measured."""
    seen = [v.observation for v in result.partitions if v.observation.checkpoint_offset is not None
            and v.observation.in_topic]
    if not kafka_config or not seen:
        return result
    offsets = {o.partition: o.checkpoint_offset for o in seen if o.checkpoint_offset is not None}
    highs = {o.partition: o.high for o in seen if o.high is not None}
    seconds = seconds_behind(kafka_config, offsets, highs, now)
    return result if seconds is None else replace(result, time_lag_seconds=seconds)
