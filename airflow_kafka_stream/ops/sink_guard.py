"""The checks a job's sink kind asks of a reset or restore, made before anything changes.

Spark's file sink keeps its own log of batch ids (``<output>/_spark_metadata``)
and skips a batch whose id it has logged. A new checkpoint with dropped state
restarts batch ids at 0; a restored savepoint resumes after its own batch,
which is behind the sink when the job ran on after the savepoint (the usual
upgrade, then roll back). Either way the sink would drop data without a word.
A batch appended by a reset needs its entry in that log, so the log must be
where the job says it is.

An idempotent sink (output replaced per checkpoint generation and batch id)
keeps no such log: none of these checks apply, and the outcome says so.
"""

from __future__ import annotations

from airflow_kafka_stream.checkpoint.savepoints import sink_batch_log, sink_log_latest_batch
from airflow_kafka_stream.core.sink import Sink
from airflow_kafka_stream.errors import JobStateError

#: What an operation reports when the job records no sink.
NO_SINK = ("no sink recorded for this job: no sink batch log was checked or extended (if the query writes Spark's "
           "file sink, give its output directory as sink_path)")


def sink_note(sink: Sink | None) -> str:
    """One sentence for the outcome: which sink the operation assumed, and what that meant."""
    return sink.describe() if sink is not None else NO_SINK


def ensure_sink_log_present(sink: Sink | None, storage_options: dict | None = None) -> None:
    """JobStateError when a file sink's path has no ``_spark_metadata`` (an appended batch needs an entry there)."""
    if sink is None or not sink.has_batch_log or sink_batch_log(str(sink.path), storage_options):
        return
    raise JobStateError(
        f"the job's sink is recorded as a file sink at {sink.path}, but that directory has no _spark_metadata batch "
        "log, so the appended batch cannot be logged there. If the query writes with foreachBatch (output replaced "
        "per batch id), set sink_kind to idempotent; if it writes a file sink elsewhere, set sink_path to that "
        "directory", setting=("sink_kind", "sink_path")
    )


def ensure_sink_accepts(sink: Sink | None, next_batch_id: int, allow: bool,
                        storage_options: dict | None = None) -> None:
    """JobStateError when a file sink's log already holds ``next_batch_id`` (unless ``allow``)."""
    if sink is None or not sink.has_batch_log or allow:
        return
    latest = sink_log_latest_batch(str(sink.path), storage_options)
    if latest is None or latest < next_batch_id:
        return
    raise JobStateError(
        f"the file sink at {sink.path} has already logged batches up to {latest} in its _spark_metadata, and the "
        f"checkpoint would continue at batch {next_batch_id}: the sink would silently skip batches "
        f"{next_batch_id}..{latest}. Write to a new output path, or set allow_sink_batch_log if you accept that",
        setting="allow_sink_batch_log"
    )
