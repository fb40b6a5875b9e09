"""Deprecated alias of :mod:`airflow_kafka_stream.runtime`: import StreamConfig and StreamRuntime from there.

``checkpoint_position`` is kept here only: the runtime now reads a checkpoint's position with
:func:`airflow_kafka_stream.checkpoint.reader.read_started_position`.
"""

from __future__ import annotations

from airflow_kafka_stream.checkpoint.reader import read_started_position
from airflow_kafka_stream.core.offsets import PartitionOffsets
from airflow_kafka_stream.spark._alias import reexport

__all__ = [*reexport(__name__, globals()), "checkpoint_position"]


def checkpoint_position(url: str, storage_options: dict | None = None
                        ) -> tuple[int | None, PartitionOffsets | None, bool]:
    """Deprecated: use ``checkpoint.reader.read_started_position``. The last committed batch id, every Kafka
    source's offsets at it, and whether a later batch is in flight; ``(None, None, False)`` before the query
    first wrote the location."""
    position = read_started_position(url, storage_options)
    if position is None:
        return None, None, False
    return position.batch_id, position.committed_kafka_offsets(), position.in_flight_batch_id is not None
