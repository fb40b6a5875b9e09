"""Savepoint operations on a job home: create, list, show, validate, delete, prune, restore.

Savepoints are taken only from a stopped job with no batch in flight, and are
never modified. Restoring never touches the current checkpoint: it starts a new
checkpoint generation, either a copy of the savepoint (state kept, Spark
resumes after the savepoint's batch) or, with ``drop_state``, an empty one
seeded with the savepoint's offsets (Flink's allowNonRestoredState).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.savepoints import (
    create_savepoint,
    delete_savepoint,
    list_savepoints,
    prune_savepoints,
    read_manifest,
    restore_savepoint,
    validate_savepoint,
)
from airflow_kafka_stream.checkpoint.writer import recover_incomplete_append
from airflow_kafka_stream.core.offsets import to_nested
from airflow_kafka_stream.core.reset_plan import parse_duration
from airflow_kafka_stream.core.savepoint_manifest import Manifest
from airflow_kafka_stream.core.sink import resolve_sink, sink_from_spec
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.ops.guard import ensure_not_running
from airflow_kafka_stream.ops.operation import recorded_operation
from airflow_kafka_stream.ops.sink_guard import ensure_sink_accepts, sink_note
from airflow_kafka_stream.storage.jobhome import JobHome


def _spark_version() -> str | None:
    try:
        import pyspark

        return pyspark.__version__
    except ImportError:  # the control plane can run without Spark installed
        return None


def manifest_dict(manifest: Manifest) -> dict[str, Any]:
    try:
        offsets = to_nested(manifest.source_offsets(0))
    except Exception:  # noqa: BLE001 - a non-Kafka first source is shown raw
        offsets = None
    return {
        "id": manifest.savepoint_id,
        "created_at": manifest.created_at.isoformat(),
        "batch_id": manifest.batch_id,
        "query_id": manifest.query_id,
        "offsets": offsets,
        "app_version": manifest.app_version,
        "spark_version": manifest.spark_version,
        "stateful": manifest.stateful,
        "state_store_provider": manifest.state_store_provider,
        "files": len(manifest.files),
    }


def new_savepoint_id(batch_id: int, now: datetime) -> str:
    """Sortable, unique per batch and second: sp-20261122T101500Z-b42."""
    return f"sp-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-b{batch_id}"


def create_locked(home: JobHome, app_version: str | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Create a savepoint; the caller holds the job lock and knows the job is stopped."""
    now = now or datetime.now(UTC)
    checkpoint = home.checkpoint_url()
    recover_incomplete_append(checkpoint, home.storage_options)  # a crashed reset is finished or undone first
    pos = read_position(checkpoint, home.storage_options)
    if pos.batch_id is None:
        raise JobStateError(f"{checkpoint} has no committed batch yet: there is nothing to save")
    version = app_version or str(home.spec().get("version") or "unknown")
    savepoint_id = new_savepoint_id(pos.batch_id, now)
    taken = {m.rstrip("/").rsplit("/", 1)[-1] for m in _existing(home)}
    base, n = savepoint_id, 2
    while savepoint_id in taken:  # two savepoints of one batch within a second
        savepoint_id, n = f"{base}-{n}", n + 1
    manifest = create_savepoint(checkpoint, home.savepoint_url(savepoint_id), version, now,
                                spark_version=_spark_version(), storage_options=home.storage_options)
    return manifest_dict(manifest)


def _existing(home: JobHome) -> list[str]:
    try:
        return home.fs.ls(home.p("savepoints"), detail=False)
    except FileNotFoundError:
        return []


def create(home: JobHome, app_version: str | None = None, now: datetime | None = None,
           by: str | None = None) -> dict[str, Any]:
    with recorded_operation(home, "savepoint-create", {"app_version": app_version}, by=by) as record:
        ensure_not_running(home, operation="taking a savepoint")
        result = create_locked(home, app_version, now)
        record["after"] = result
        return result


def list_all(home: JobHome) -> list[dict[str, Any]]:
    return [manifest_dict(m) for m in list_savepoints(home.savepoints_url, home.storage_options)]


def restore(home: JobHome, savepoint_id: str, drop_state: bool = False, sink_path: str | None = None,
            allow_sink_batch_log: bool = False, by: str | None = None, sink_kind: str | None = None) -> dict[str, Any]:
    """Start a new checkpoint generation from a savepoint (refused while the job runs).

    ``sink_kind``/``sink_path`` override the sink job.json records (see core.sink.resolve_sink).
    """
    if not savepoint_id:
        raise InvalidInputError("restore needs --savepoint ID; list them with `airflow-kafka-stream savepoint list`")
    sink = resolve_sink(sink_from_spec(home.spec()), sink_kind, sink_path)
    args = {"savepoint": savepoint_id, "drop_state": drop_state, "sink": sink.to_json() if sink else None}
    with recorded_operation(home, "restore", args, by=by) as record:
        ensure_not_running(home, operation="a restore")
        url = home.savepoint_url(savepoint_id)
        manifest = validate_savepoint(url, home.storage_options)
        record["before"] = {"generation": home.current_generation()}
        # Dropping state restarts batch ids at 0; keeping it resumes after the savepoint's batch.
        next_batch = 0 if drop_state else manifest.batch_id + 1
        ensure_sink_accepts(sink, next_batch, allow_sink_batch_log, home.storage_options)
        if drop_state:
            offsets = to_nested(manifest.source_offsets(0))
            gen, checkpoint = home.new_generation("restore-drop-state", start_offsets=offsets,
                                                  from_savepoint=savepoint_id)
        else:
            gen, checkpoint = home.new_generation(
                "restore", from_savepoint=savepoint_id,
                populate=lambda target: restore_savepoint(url, target, home.storage_options))
        result = {"savepoint": manifest_dict(manifest), "generation": gen, "checkpoint": checkpoint,
                  "drop_state": drop_state, "sink": sink_note(sink)}
        record["after"] = result
        return result


def restore_text(result: dict[str, Any]) -> str:
    sp = result["savepoint"]
    how = ("fresh checkpoint seeded with the savepoint's offsets (operator state dropped)" if result["drop_state"]
           else f"copy of the savepoint; Spark resumes after batch {sp['batch_id']}")
    return (f"restored savepoint {sp['id']} into checkpoint generation {result['generation']}:\n"
            f"  {result['checkpoint']}\n  {how}\n  offsets: {sp['offsets']}\n  sink: {result['sink']}\n"
            "Start the job to continue from there.")


# -- CLI adapters: each returns (data for --json, text for people) ---------------------------------------------------

def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no savepoints)"
    head = f"{'ID':<34} {'CREATED':<26} {'BATCH':>6} {'APP VERSION':<14} STATE"
    body = [f"{r['id']:<34} {r['created_at'][:25]:<26} {r['batch_id']:>6} {str(r['app_version'])[:14]:<14} "
            f"{r['state_store_provider'].rsplit('.', 1)[-1] if r['stateful'] and r['state_store_provider'] else '-'}"
            for r in rows]
    return "\n".join([head, *body])


def _need_id(args: argparse.Namespace) -> str:
    if not args.savepoint_id:
        raise InvalidInputError(f"savepoint {args.action} needs a savepoint id; list them with `savepoint list`")
    return args.savepoint_id


def cli_create(home: JobHome, args: argparse.Namespace) -> tuple[Any, str]:
    result = create(home, app_version=args.app_version)
    return result, f"created savepoint {result['id']} at batch {result['batch_id']}: offsets {result['offsets']}"


def cli_list(home: JobHome, args: argparse.Namespace) -> tuple[Any, str]:
    rows = list_all(home)
    return rows, _table(rows)


def cli_show(home: JobHome, args: argparse.Namespace) -> tuple[Any, str]:
    data = manifest_dict(read_manifest(home.savepoint_url(_need_id(args)), home.storage_options))
    return data, "\n".join(f"{k:<22}{v}" for k, v in data.items())


def cli_validate(home: JobHome, args: argparse.Namespace) -> tuple[Any, str]:
    manifest = validate_savepoint(home.savepoint_url(_need_id(args)), home.storage_options)
    return manifest_dict(manifest), f"savepoint {manifest.savepoint_id}: all {len(manifest.files)} checksums match"


def cli_delete(home: JobHome, args: argparse.Namespace) -> tuple[Any, str]:
    savepoint_id = _need_id(args)
    with recorded_operation(home, "savepoint-delete", {"savepoint": savepoint_id}) as record:
        read_manifest(home.savepoint_url(savepoint_id), home.storage_options)  # refuses unknown ids
        delete_savepoint(home.savepoint_url(savepoint_id), home.storage_options)
        record["after"] = {"deleted": savepoint_id}
    return {"deleted": savepoint_id}, f"deleted savepoint {savepoint_id}"


def cli_prune(home: JobHome, args: argparse.Namespace) -> tuple[Any, str]:
    if args.keep_last is None and args.keep_within is None:
        raise InvalidInputError("prune needs --keep-last N and/or --keep-within DURATION (e.g. P7D)")
    if args.keep_last is not None and args.keep_last < 1:
        raise InvalidInputError(f"--keep-last must be at least 1 (the newest is always kept), got {args.keep_last}")
    max_age = parse_duration(args.keep_within) if args.keep_within else None
    with recorded_operation(home, "savepoint-prune", {"keep_last": args.keep_last,
                                                      "keep_within": args.keep_within}) as record:
        deleted = prune_savepoints(home.savepoints_url, datetime.now(UTC), keep_last=args.keep_last,
                                   max_age=max_age, storage_options=home.storage_options)
        record["after"] = {"deleted": deleted}
    return {"deleted": deleted}, ("deleted " + ", ".join(deleted)) if deleted else "nothing to prune"
