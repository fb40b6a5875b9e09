"""The runtime reads Spark's progress events from their JSON (one py4j call, not fifty)."""

from __future__ import annotations

import json

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.runtime.listener import BatchListener
from airflow_kafka_stream.runtime.progress import progress_from_json

#: The shape of StreamingQueryProgress.json in Spark 4.2; NaN rates are left out, as Spark does.
PROGRESS = {
    "id": "8f1c0c56-4f4e-4c4e-9a1e-2a3b4c5d6e7f",
    "runId": "0d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6",
    "name": None,
    "timestamp": "2026-11-22T17:00:00.000Z",
    "batchId": 7,
    "batchDuration": 120,
    "numInputRows": 42,
    "processedRowsPerSecond": 350.0,
    "durationMs": {"addBatch": 80, "commitOffsets": 5, "latestOffset": 3, "triggerExecution": 120},
    "stateOperators": [],
    "sources": [
        {
            "description": "kafka_stream",
            "startOffset": {"orders": {"0": 10, "1": 4}},
            "endOffset": {"orders": {"0": 40, "1": 16}},
            "latestOffset": {"orders": {"0": 40, "1": 16}},
            "numInputRows": 42,
            "processedRowsPerSecond": 350.0,
        }
    ],
    "sink": {"description": "noop", "numOutputRows": -1},
}


def test_progress_fields_the_runtime_uses():
    progress = progress_from_json(json.dumps(PROGRESS))
    assert (progress.id, progress.batchId, progress.numInputRows) == (PROGRESS["id"], 7, 42)
    assert progress.end_offsets == {TopicPartition("orders", 0): 40, TopicPartition("orders", 1): 16}


def test_the_event_time_watermark_and_oldest_event_are_read_and_spark_zero_is_no_watermark():
    from datetime import UTC, datetime

    timed = progress_from_json(json.dumps({**PROGRESS, "eventTime": {
        "avg": "2026-11-30T07:20:00.000Z", "max": "2026-11-30T07:50:00.000Z", "min": "2026-11-30T06:05:00.000Z",
        "watermark": "2026-11-30T07:40:00.000Z"}}))
    assert timed.watermark == datetime(2026, 11, 30, 7, 40, tzinfo=UTC)
    assert timed.event_time_min == datetime(2026, 11, 30, 6, 5, tzinfo=UTC)
    first = progress_from_json(json.dumps({**PROGRESS, "eventTime": {"watermark": "1970-01-01T00:00:00.000Z"}}))
    assert (first.watermark, first.event_time_min) == (None, None)
    assert progress_from_json(json.dumps(PROGRESS)).watermark is None


def test_only_executed_batches_of_the_query_reach_the_runtime():
    seen: list = []
    listener = BatchListener(seen.append)
    listener.query_id = PROGRESS["id"]
    listener.on_progress_json(json.dumps(PROGRESS))
    listener.on_progress_json(json.dumps({**PROGRESS, "id": "another-query"}))
    idle = {**PROGRESS, "numInputRows": 0, "durationMs": {"latestOffset": 2, "triggerExecution": 2}}
    listener.on_progress_json(json.dumps(idle))  # no batch ran: nothing to commit
    assert [p.batchId for p in seen] == [7]


def test_backlog_is_what_the_source_saw_waiting_when_it_planned_the_batch():
    """Lag sample of the job page: latestOffset - startOffset per partition, summed (30 + 12 here)."""
    assert progress_from_json(json.dumps(PROGRESS)).backlog == 42
    first = {**PROGRESS, "sources": [{**PROGRESS["sources"][0], "startOffset": None}]}
    assert progress_from_json(json.dumps(first)).backlog is None, "a first batch has no start: no sample"
    jvm = {**PROGRESS, "sources": [{**PROGRESS["sources"][0], "latestOffset": None}]}
    assert progress_from_json(json.dumps(jvm)).backlog is None, "a source that reports no latest: no sample"
    new_partition = {**PROGRESS, "sources": [{**PROGRESS["sources"][0],
                                              "latestOffset": {"orders": {"0": 40, "1": 16, "2": 5}}}]}
    assert progress_from_json(json.dumps(new_partition)).backlog == 42, "a partition not started yet counts 0"
