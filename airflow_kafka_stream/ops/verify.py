"""Verify a job: group offsets against checkpoint offsets and topic watermarks, per partition."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from airflow_kafka_stream.core.reset_plan import parse_duration
from airflow_kafka_stream.core.verify import VerifyResult
from airflow_kafka_stream.kafka.control_inputs import verify_job
from airflow_kafka_stream.ops.context import JobContext
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.inspect import position, unstarted


def verify(ctx: JobContext, stall_threshold: str | timedelta = "PT10M", now: datetime | None = None) -> VerifyResult:
    """Observe checkpoint, group and watermarks, then evaluate the rules.

    STALLED is judged only while the job's heartbeat says it runs: a stopped job
    with lag is expected, a running one that commits no batch is not.
    """
    now = now or datetime.now(UTC)
    stall_after = parse_duration(stall_threshold) if isinstance(stall_threshold, str) else stall_threshold
    seeded = unstarted(ctx)
    if seeded is not None:
        # No query ran on this generation yet: the job will resume at its seeded offsets.
        result = verify_job(ctx.require_kafka(), ctx.require_group(), seeded.offsets(),
                            ctx.topics_with(seeded.offsets()), now=now, stall_after=stall_after)
        return replace(result, note=f"{seeded.describe()}; the CHECKPOINT column shows those start offsets")
    pos = position(ctx)
    # Every Kafka source of a query that unions several readers; refused when two share a partition.
    checkpoint_offsets = pos.kafka_offsets("verification")
    topics = ctx.topics_with(checkpoint_offsets)
    last_batch_at = None
    if ctx.home is not None:
        running, _status = job_is_running(ctx.home, now)
        if running and pos.timestamp_ms:
            last_batch_at = datetime.fromtimestamp(pos.timestamp_ms / 1000, UTC)
    return verify_job(ctx.require_kafka(), ctx.require_group(), checkpoint_offsets, topics, now=now,
                      last_batch_at=last_batch_at, stall_after=stall_after)
