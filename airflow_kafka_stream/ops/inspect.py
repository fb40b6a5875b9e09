"""Inspect a job: what it is doing now (status), its checkpoint's position (cheap), what its state holds, and a
full consistency check of the checkpoint (fsck)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.checkpoint.fsck import fsck as fsck_checkpoint
from airflow_kafka_stream.checkpoint.reader import CheckpointPosition, read_position
from airflow_kafka_stream.checkpoint.state_info import read_state
from airflow_kafka_stream.checkpoint.writer import recover_incomplete_append
from airflow_kafka_stream.core.checkpoint_fsck import Finding, FsckReport, Severity
from airflow_kafka_stream.core.state_metadata import CheckpointState
from airflow_kafka_stream.core.status_document import StatusDocument, written_state
from airflow_kafka_stream.ops.context import JobContext, build_context
from airflow_kafka_stream.ops.guard import ensure_not_running, job_shown_state
from airflow_kafka_stream.ops.hot_standby import is_hot, wish
from airflow_kafka_stream.ops.results import JobStatus, RepairResult
from airflow_kafka_stream.ops.standby import live_standby
from airflow_kafka_stream.ops.unstarted import UnstartedGeneration, unstarted_generation
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation


def position(ctx: JobContext, operation: str = "this operation") -> CheckpointPosition:
    """The checkpoint's position; a clear refusal when its generation was seeded but has not started."""
    seeded = unstarted(ctx)
    if seeded is not None:
        raise seeded.refusal(operation)
    return read_position(ctx.checkpoint_url, ctx.storage_options)


def unstarted(ctx: JobContext) -> UnstartedGeneration | None:
    """The job's current generation when no query has started on it yet (seeded by a restore or reset)."""
    return unstarted_generation(ctx.home, ctx.checkpoint_url)


def state(target: JobContext | JobHome) -> CheckpointState:
    """The stateful operators of the current checkpoint (or ``--checkpoint``): ids, names, stores, partitions,
    versions present, key and value schemas, read from Spark's own files (see checkpoint.state_info).

    Reads only (no lock): a running job's checkpoint can be listed; files Spark's maintenance removes meanwhile
    show up as that operator's problem. A job home is read at its current generation.
    """
    if isinstance(target, JobHome):
        target = build_context(job_home=target.url, storage_options=target.storage_options, uses_kafka=False)
    seeded = unstarted(target)
    if seeded is not None:
        return CheckpointState(target.checkpoint_url, None, False,
                               note=f"{seeded.describe()}; it holds no state until the job starts on it")
    return read_state(target.checkpoint_url, target.storage_options)


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


def job_status(home: JobHome, now: datetime | None = None) -> JobStatus:
    """The job's state as its driver last reported it, and whether it still runs (reads only; no lock)."""
    home.require()
    now = now or datetime.now(UTC)
    shown, found, raw = job_shown_state(home, now)
    running = found.alive
    status = StatusDocument.of(raw)
    spec = home.spec()
    age = status.heartbeat_age(now) if status else None
    standby = shown_standby(home, now, running)
    commits = status.group_commits if status else None
    return JobStatus(
        job_home=home.url,
        job=spec.get("job") or home.url.rstrip("/").rsplit("/", 1)[-1],
        state=shown.state if status is not None else None,
        running=running,
        driver_lost=bool(status and status.is_live) and not running,
        app_version=spec.get("version"),
        heartbeat_age_seconds=round(age, 1) if age is not None else None,
        generation=home.current_generation(),
        last_batch_id=status.last_batch_id if status else None,
        last_offsets=status.last_offsets if status else None,
        group=spec.get("group"),
        topics=list(spec.get("topics") or []),
        group_commits=(raw or {}).get("group_commits") if commits is not None else None,
        dead_letters=status.dead_letters if status else None,
        read_placement=status.read_placement if status else None,
        stop_requested_at=status.stop_requested_at if status else None,
        error=status.error if status else None,
        standby=standby,
        time_lag=status.time_lag if status else None,
        metrics=(raw or {}).get("metrics") if status is not None and status.metrics is not None else None,
        recorded_state=written_state(status),
        state_reason=shown.reason if status is not None else None,
    )


def shown_standby(home: JobHome, now: datetime, running: bool) -> dict[str, Any] | None:
    """The job's standby as ``status`` and the job page show it: a live one (an upgrade's, or the hot standby
    with ``hot``), or, for a running job that wants a hot standby and has none live, ``state`` NONE and what
    became of the last one; None otherwise (an upgrade's standby that is over, a stopped job)."""
    record = home.standby_record() or {}
    if live_standby(home, now) is not None:
        return {**{key: record.get(key) for key in ("state", "version", "pid", "host", "launched_at")},
                "hot": is_hot(record), "note": record.get("note")}
    if wish(home) is None or not running:
        return None
    if not record:
        last = "none was launched yet"
    elif record.get("state") == "ACTIVE":
        last = f"the last one (pid {record.get('pid')}) took the job over at {record.get('ended_at')}"
    else:
        last = f"the last one (pid {record.get('pid')}) is {record.get('state')}: {record.get('error') or 'no reason'}"
    return {"state": "NONE", "version": None, "pid": None, "host": None, "launched_at": None, "hot": True,
            "note": f"the job wants a hot standby and has none live; {last} (the next supervisor or watchdog pass "
                    "launches one)"}
