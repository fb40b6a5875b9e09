"""Spark's progress events read into what the runtime records of a batch.

A progress event (``StreamingQueryProgress.json``) says which batch ran, how many records it read,
the Kafka end offsets it committed and the backlog it was planned against; these functions take
just that out of the JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.asset_windows import parse_time
from airflow_kafka_stream.core.offsets import PartitionOffsets, parse_offsets_json, records_behind
from airflow_kafka_stream.errors import CheckpointFormatError


def offsets_equal(left: Any, right: Any) -> bool:
    """Compare two Spark offsets JSON values as mappings (spacing and order do not matter)."""
    try:
        return left is not None and right is not None and parse_offsets_json(left) == parse_offsets_json(right)
    except (CheckpointFormatError, TypeError):
        return False


def batch_end_offsets(ends: list[Any]) -> PartitionOffsets | None:
    """The Kafka end offsets of one batch from its sources' ``endOffset`` values (None if no Kafka source)."""
    merged: PartitionOffsets = {}
    found = False
    for end in ends:
        if not end:
            continue
        try:
            merged.update(parse_offsets_json(end))
            found = True
        except CheckpointFormatError:
            continue  # not a Kafka source (e.g. a rate source joined in)
    return merged if found else None


def batch_backlog(sources: list[Mapping[str, Any]]) -> int | None:
    """Records waiting when a batch was planned: each Kafka source's ``latestOffset`` minus its ``startOffset``.

    The source reports the high watermarks it planned against (``reportLatestOffset``), so this is the
    job's lag at that moment, summed over partitions; None when no source reports both (a first batch
    has no start, a JVM source may report no latest).
    """
    total, found = 0, False
    for source in sources:
        try:
            start = parse_offsets_json(source.get("startOffset")) if source.get("startOffset") else None
            latest = parse_offsets_json(source.get("latestOffset")) if source.get("latestOffset") else None
        except CheckpointFormatError:
            continue
        if start is None or latest is None:
            continue
        total += sum(records_behind(high, start.get(tp, high)) for tp, high in latest.items())
        found = True
    return total if found else None


@dataclass(frozen=True)
class BatchProgress:
    """The fields of a StreamingQueryProgress the runtime uses."""

    id: str
    batchId: int  # noqa: N815 - Spark's name
    numInputRows: int  # noqa: N815
    durationMs: dict[str, int]  # noqa: N815
    end_offsets: PartitionOffsets | None
    backlog: int | None = None
    #: The high watermarks the batch was planned against (``latestOffset``), when the source reports them.
    latest_offsets: PartitionOffsets | None = None
    #: The Kafka offsets the batch started at (its sources' ``startOffset``; None when none reports one).
    start_offsets: PartitionOffsets | None = None
    #: The event-time watermark the batch ran with (``eventTime.watermark``; None without one, or still at 0).
    watermark: datetime | None = None
    #: The oldest event time the batch read (``eventTime.min``; None when the query has no watermark).
    event_time_min: datetime | None = None


def _event_time(event_time: Mapping[str, Any], name: str) -> datetime | None:
    """A time of the progress's ``eventTime`` (``2026-12-04T09:00:00.000Z``); Spark's 0 (no watermark yet) is None."""
    moment = parse_time(event_time.get(name))
    return moment if moment is not None and moment.timestamp() > 0 else None


def progress_from_json(text: str) -> BatchProgress:
    """A progress event's JSON (``StreamingQueryProgress.json``) read into the fields the runtime uses."""
    data = json.loads(text)
    return BatchProgress(
        id=str(data["id"]),
        batchId=int(data["batchId"]),
        numInputRows=int(data.get("numInputRows") or 0),
        durationMs=dict(data.get("durationMs") or {}),
        end_offsets=batch_end_offsets([source.get("endOffset") for source in data.get("sources") or []]),
        backlog=batch_backlog(data.get("sources") or []),
        latest_offsets=batch_end_offsets([source.get("latestOffset") for source in data.get("sources") or []]),
        start_offsets=batch_end_offsets([source.get("startOffset") for source in data.get("sources") or []]),
        watermark=_event_time(data.get("eventTime") or {}, "watermark"),
        event_time_min=_event_time(data.get("eventTime") or {}, "min"),
    )
