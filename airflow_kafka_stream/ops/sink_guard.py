"""Refuse to start a checkpoint at batch ids a file sink has already logged (it would skip them silently).

Spark's file sink keeps its own log of batch ids (``<output>/_spark_metadata``)
and skips a batch whose id it has logged. A new checkpoint with dropped state
restarts batch ids at 0; a restored savepoint resumes after its own batch,
which is behind the sink when the job ran on after the savepoint (the usual
upgrade, then roll back). Either way the sink would drop data without a word.
"""

from __future__ import annotations

from airflow_kafka_stream.checkpoint.savepoints import sink_log_latest_batch
from airflow_kafka_stream.errors import JobStateError


def ensure_sink_accepts(sink_path: str | None, next_batch_id: int, allow: bool,
                        storage_options: dict | None = None) -> None:
    """JobStateError when the sink's log already holds ``next_batch_id`` (unless ``allow``)."""
    if not sink_path or allow:
        return
    latest = sink_log_latest_batch(sink_path, storage_options)
    if latest is None or latest < next_batch_id:
        return
    raise JobStateError(
        f"the file sink at {sink_path} has already logged batches up to {latest} in its _spark_metadata, and the "
        f"checkpoint would continue at batch {next_batch_id}: the sink would silently skip batches "
        f"{next_batch_id}..{latest}. Write to a new output path, or pass --allow-sink-batch-log if you accept that"
    )
