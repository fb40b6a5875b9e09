"""Inspect a checkpoint: its position (cheap) and a full consistency check (fsck)."""

from __future__ import annotations

from airflow_kafka_stream.checkpoint.fsck import fsck as fsck_checkpoint
from airflow_kafka_stream.checkpoint.reader import CheckpointPosition, read_position
from airflow_kafka_stream.core.checkpoint_fsck import Finding, FsckReport, Severity
from airflow_kafka_stream.ops.context import JobContext
from airflow_kafka_stream.ops.results import RepairResult
from airflow_kafka_stream.ops.unstarted import UnstartedGeneration, unstarted_generation


def position(ctx: JobContext, operation: str = "this operation") -> CheckpointPosition:
    """The checkpoint's position; a clear refusal when its generation was seeded but has not started."""
    seeded = unstarted(ctx)
    if seeded is not None:
        raise seeded.refusal(operation)
    return read_position(ctx.checkpoint_url, ctx.storage_options)


def unstarted(ctx: JobContext) -> UnstartedGeneration | None:
    """The job's current generation when no query has started on it yet (seeded by a restore or reset)."""
    return unstarted_generation(ctx.home, ctx.checkpoint_url)


def fsck(ctx: JobContext) -> FsckReport:
    """Check the checkpoint against what Spark needs to restart from it (see checkpoint.fsck)."""
    seeded = unstarted(ctx)
    if seeded is not None:  # fit to start from: the job starts at the recorded offsets
        return FsckReport(ctx.checkpoint_url, (Finding(Severity.INFO, ctx.checkpoint_url,
                                                       f"{seeded.describe()}; fit to start from"),))
    return fsck_checkpoint(ctx.checkpoint_url, ctx.storage_options)


def repair(ctx: JobContext) -> RepairResult:
    """Complete or roll back an offset reset that a crash interrupted; report abandoned generations.

    The job runtime and every control-plane operation do this themselves before
    they touch the checkpoint; this is for a checkpoint Spark is started on directly.
    """
    from airflow_kafka_stream.checkpoint.writer import recover_incomplete_append
    from airflow_kafka_stream.ops.guard import ensure_not_running
    from airflow_kafka_stream.ops.operation import recorded_operation

    def work() -> RepairResult:
        outcome = recover_incomplete_append(ctx.checkpoint_url, ctx.storage_options)
        abandoned = ctx.home.abandoned_generations() if ctx.home is not None else []
        return RepairResult(ctx.checkpoint_url, outcome, list(abandoned))

    if ctx.home is None:
        return work()  # a bare checkpoint: the caller vouches that no query runs on it
    with recorded_operation(ctx.home, "repair", {"checkpoint": ctx.checkpoint_url}) as record:
        ensure_not_running(ctx.home, operation="repairing the checkpoint")
        result = work()
        record["after"] = result.to_dict()
        return result
