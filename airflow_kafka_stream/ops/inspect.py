"""Inspect a checkpoint: its position (cheap) and a full consistency check (fsck)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.checkpoint.fsck import fsck as fsck_checkpoint
from airflow_kafka_stream.checkpoint.reader import CheckpointPosition, read_position
from airflow_kafka_stream.core.checkpoint_fsck import Finding, FsckReport, Severity
from airflow_kafka_stream.core.checkpoint_log import OffsetLogEntry
from airflow_kafka_stream.core.offsets import to_nested
from airflow_kafka_stream.ops.context import JobContext
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
    seeded = unstarted(ctx)
    if seeded is not None:  # fit to start from: the job starts at the recorded offsets
        return FsckReport(ctx.checkpoint_url, (Finding(Severity.INFO, ctx.checkpoint_url,
                                                       f"{seeded.describe()}; fit to start from"),))
    return fsck_checkpoint(ctx.checkpoint_url, ctx.storage_options)


def repair(ctx: JobContext) -> dict[str, Any]:
    """Complete or roll back an offset reset that a crash interrupted; report abandoned generations.

    The job runtime and every control-plane operation do this themselves before
    they touch the checkpoint; this is for a checkpoint Spark is started on directly.
    """
    from airflow_kafka_stream.checkpoint.writer import recover_incomplete_append
    from airflow_kafka_stream.ops.guard import ensure_not_running
    from airflow_kafka_stream.ops.operation import recorded_operation

    def work() -> dict[str, Any]:
        outcome = recover_incomplete_append(ctx.checkpoint_url, ctx.storage_options)
        abandoned = ctx.home.abandoned_generations() if ctx.home is not None else []
        return {"checkpoint": ctx.checkpoint_url, "interrupted_reset": outcome, "abandoned_generations": abandoned}

    if ctx.home is None:
        return work()  # a bare checkpoint: the caller vouches that no query runs on it
    with recorded_operation(ctx.home, "repair", {"checkpoint": ctx.checkpoint_url}) as record:
        ensure_not_running(ctx.home, operation="repairing the checkpoint")
        record["after"] = result = work()
        return result


def fsck_dict(report: FsckReport) -> dict[str, Any]:
    return {"checkpoint": report.url, "ok": report.ok,
            "findings": [{"severity": f.severity.value, "path": f.path, "message": f.message}
                         for f in report.findings]}


def kafka_offsets(pos: CheckpointPosition) -> dict[str, dict[str, int]] | None:
    """Every Kafka source's offsets of the committed batch in Spark's nested shape (None: no Kafka source,
    or two sources sharing a partition, which have no single position)."""
    if pos.offsets is None:
        return None
    sources = pos.kafka_sources()
    if not sources.by_index or sources.shared_partitions():
        return None
    return to_nested(sources.union())


def _kafka_sources(entry: OffsetLogEntry | None) -> dict[str, dict[str, dict[str, int]]]:
    if entry is None:
        return {}
    return {str(index): to_nested(line) for index, line in sorted(entry.kafka_sources().by_index.items())}


def _time(ms: int | None) -> str | None:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat() if ms else None


def position_dict(pos: CheckpointPosition) -> dict[str, Any]:
    in_flight = None
    if pos.in_flight_batch_id is not None:
        flight = pos.in_flight_offsets.kafka_sources() if pos.in_flight_offsets else None
        in_flight = {"batch_id": pos.in_flight_batch_id,
                     "offsets": to_nested(flight.union()) if flight and not flight.shared_partitions() else None,
                     "kafka_sources": _kafka_sources(pos.in_flight_offsets)}
    return {
        "checkpoint": pos.url,
        "query_id": pos.query_id,
        "batch_id": pos.batch_id,
        "offsets": kafka_offsets(pos),
        "kafka_sources": _kafka_sources(pos.offsets),
        "sources": list(pos.offsets.source_lines) if pos.offsets else [],
        "batch_watermark_ms": pos.watermark_ms,
        "batch_time": _time(pos.timestamp_ms),
        "in_flight": in_flight,
        "stateful": pos.stateful,
        "state_store_provider": pos.state_store_provider,
        "stateful_operators": [op.__dict__ for op in pos.stateful_operators],
        "interrupted_append": pos.incomplete_append,
    }


def position_text(pos: CheckpointPosition) -> str:
    d = position_dict(pos)
    lines = [
        f"checkpoint      {d['checkpoint']}",
        f"query id        {d['query_id']}",
        f"last committed  batch {d['batch_id'] if d['batch_id'] is not None else '(none yet)'}"
        + (f" at {d['batch_time']}" if d["batch_time"] else ""),
        f"watermark       {d['batch_watermark_ms']}",
        f"state           {'stateful, ' + str(d['state_store_provider']) if d['stateful'] else 'stateless'}",
    ]
    if d["in_flight"]:
        lines.append(f"IN FLIGHT       batch {d['in_flight']['batch_id']} (planned, not committed: Spark re-runs it)")
    if d["interrupted_append"] is not None:
        lines.append(f"INTERRUPTED     offset append of batch {d['interrupted_append']}: run `airflow-kafka-stream "
                     "checkpoint repair` (the next reset or job start does it too)")
    if pos.offsets is None:
        return "\n".join(lines)
    kafka = d["kafka_sources"]
    if not kafka:
        lines += ["", f"no Kafka source: none of the {len(d['sources'])} source line(s) of batch {d['batch_id']} "
                      "holds Kafka offsets (a query over another source, e.g. rate); verify and reset do not apply"]
        return "\n".join(lines)
    several = len(d["sources"]) > 1
    lines.append("")
    lines.append(("SOURCE  " if several else "") + f"{'TOPIC':<30} {'PARTITION':>9} {'NEXT OFFSET':>12}")
    for index, line in kafka.items():
        for topic, parts in line.items():
            for part, off in parts.items():
                lines.append((f"{index:<6}  " if several else "") + f"{topic:<30} {part:>9} {off:>12}")
    others = [str(i) for i in range(len(d["sources"])) if str(i) not in kafka]
    if others:
        lines.append(f"source(s) {', '.join(others)} are not Kafka sources; resets carry them unchanged")
    return "\n".join(lines)
