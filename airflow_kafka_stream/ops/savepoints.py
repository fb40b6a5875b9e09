"""Savepoint operations on a job home: create, list, show, validate, delete, prune, restore.

A savepoint is of the last committed batch: taken after a stop (no batch in
flight), or live from a RUNNING job without stopping it (``checkpoint/live_savepoint.py``
copies that batch and checks the copy). Savepoints are never modified. Restoring never touches the current checkpoint: it starts a new
checkpoint generation, either a copy of the savepoint (state kept, Spark
resumes after the savepoint's batch) or, with ``drop_state``, an empty one
seeded with the savepoint's offsets (Flink's allowNonRestoredState).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from airflow_kafka_stream.checkpoint.live_savepoint import StepHook, create_live_savepoint
from airflow_kafka_stream.checkpoint.reader import read_position, read_started_position
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
from airflow_kafka_stream.core.asset_windows import rewind_note
from airflow_kafka_stream.core.durations import parse_duration
from airflow_kafka_stream.core.live_copy import live_savepoint_refusal
from airflow_kafka_stream.core.offsets import records_read_again, to_nested
from airflow_kafka_stream.core.sink import resolve_sink, sink_from_spec
from airflow_kafka_stream.core.status_document import StatusDocument, written_state
from airflow_kafka_stream.errors import InvalidInputError, JobStateError, Refusals, StreamError
from airflow_kafka_stream.ops.guard import ensure_not_running, job_liveness
from airflow_kafka_stream.ops.reset import refuse_seeding_several_sources
from airflow_kafka_stream.ops.results import DeleteResult, PruneResult, RestoreResult, SavepointInfo
from airflow_kafka_stream.ops.sink_guard import ensure_sink_accepts, sink_note
from airflow_kafka_stream.ops.unstarted import unstarted_generation
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.low_priority import run_at_low_priority
from airflow_kafka_stream.storage.operation import recorded_operation

log = logging.getLogger(__name__)

# Lazy imports: pyspark, only for the version a savepoint records: the control plane runs without Spark installed.


def _spark_version() -> str | None:
    try:
        import pyspark

        return pyspark.__version__
    except ImportError:  # the control plane can run without Spark installed
        return None


def new_savepoint_id(batch_id: int, now: datetime) -> str:
    """Sortable, unique per batch and second: sp-20261122T101500Z-b42."""
    return f"sp-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-b{batch_id}"


def create_locked(home: JobHome, app_version: str | None = None, now: datetime | None = None,
                  exclude_in_flight: bool = False) -> SavepointInfo:
    """Create a savepoint; the caller holds the job lock and knows the job is stopped.

    ``exclude_in_flight``: a batch cancelled by a kill is left out (the savepoint is of the last committed one).
    """
    now = now or datetime.now(UTC)
    checkpoint = home.checkpoint_url()
    seeded = unstarted_generation(home, checkpoint)
    if seeded is not None:
        raise JobStateError(f"{seeded.describe()}; there is nothing to save yet (no state, no committed batch). "
                            "Start the job and let it commit a batch first; the savepoint it came from, if any, "
                            "still holds everything")
    recover_incomplete_append(checkpoint, home.storage_options)  # a crashed reset is finished or undone first
    pos = read_position(checkpoint, home.storage_options)
    if pos.batch_id is None:
        raise JobStateError(f"{checkpoint} has no committed batch yet: there is nothing to save")
    version = app_version or str(home.spec().get("version") or "unknown")
    manifest = create_savepoint(checkpoint, home.savepoint_url(_unique_id(home, pos.batch_id, now)), version, now,
                                spark_version=_spark_version(), storage_options=home.storage_options,
                                exclude_in_flight=exclude_in_flight)
    return SavepointInfo.of(manifest)


def _unique_id(home: JobHome, batch_id: int, now: datetime) -> str:
    """A new savepoint id for ``batch_id``; a suffix tells two savepoints of one batch within a second apart."""
    savepoint_id = new_savepoint_id(batch_id, now)
    taken = {m.rstrip("/").rsplit("/", 1)[-1] for m in _existing(home)}
    base, n = savepoint_id, 2
    while savepoint_id in taken:
        savepoint_id, n = f"{base}-{n}", n + 1
    return savepoint_id


def _existing(home: JobHome) -> list[str]:
    try:
        return home.fs.ls(home.p(*layout.SAVEPOINTS), detail=False)
    except FileNotFoundError:
        return []


def create(home: JobHome, app_version: str | None = None, now: datetime | None = None,
           by: str | None = None, *, step_hook: StepHook | None = None) -> SavepointInfo:
    """Take a savepoint of the job's last committed batch: live while it runs, else of the stopped job.

    A running job is copied without stopping it (:func:`create_live`); one that is STARTING, draining or
    asked to stop is refused, as is any savepoint while another operation holds the job lock.
    ``step_hook`` sees each step of a live copy (tests force races with it).
    """
    with recorded_operation(home, "savepoint-create", {"app_version": app_version}, by=by) as record:
        liveness, status = job_liveness(home)
        if liveness.alive:
            record["before"] = {"state": written_state(status), "live": True}
            result = create_live(home, status, app_version, now, step_hook=step_hook)
        else:
            result = create_locked(home, app_version, now)
        record["after"] = result.to_dict()
        return result


def create_live(home: JobHome, status: dict | None, app_version: str | None = None, now: datetime | None = None,
                *, step_hook: StepHook | None = None) -> SavepointInfo:
    """A live savepoint of the running job; the caller holds the job lock and read ``status`` (driver alive).

    Refused, with nothing written, unless the job is RUNNING with no stop request and has committed a batch.
    """
    document = StatusDocument.parse(status)
    refusal = live_savepoint_refusal(document.state if document else None,
                                     document.state_text if document else None, home.stop_requested())
    if refusal is not None:
        raise refusal
    now = now or datetime.now(UTC)
    checkpoint = home.checkpoint_url()
    if read_started_position(checkpoint, home.storage_options) is None:
        raise JobStateError(f"{checkpoint}: the job has not committed a batch yet (its query has not written the "
                            "checkpoint); there is nothing to save. Wait for its first batch and try again")
    version = app_version or (document.app_version if document else None) or str(
        home.spec().get("version") or "unknown")
    spark_version = _spark_version()
    # The copy shares the host with the job's driver more often than not: it yields the CPU to the job.
    manifest = run_at_low_priority(lambda: create_live_savepoint(
        checkpoint, lambda batch: home.savepoint_url(_unique_id(home, batch, now)), version, now,
        spark_version=spark_version, storage_options=home.storage_options, step_hook=step_hook),
        "live-savepoint-copy")
    return SavepointInfo.of(manifest)


def list_all(home: JobHome) -> list[SavepointInfo]:
    """Every savepoint of the job, oldest first."""
    home.require()
    return [SavepointInfo.of(m) for m in list_savepoints(home.savepoints_url, home.storage_options)]


#: The savepoint id that names the job's newest savepoint.
LATEST = "latest"


def resolve_id(home: JobHome, savepoint_id: str) -> str:
    """The savepoint ``savepoint_id`` names: itself, or for ``latest`` the newest one's id.

    The newest is the one created last (ties broken by id); JobStateError when the job has none.
    """
    savepoint_id = _need_id(savepoint_id, "restore")
    if savepoint_id != LATEST:
        return savepoint_id
    found = sorted(list_all(home), key=lambda item: (item.created_at, item.id))
    if not found:
        raise JobStateError(f"job {home.url} has no savepoint to restore; take one with a stop or savepoint create")
    return found[-1].id


def restore(home: JobHome, savepoint_id: str, drop_state: bool = False, sink_path: str | None = None,
            allow_sink_batch_log: bool = False, by: str | None = None, sink_kind: str | None = None,
            kafka_config: Mapping[str, object] | None = None, group: str | None = None) -> RestoreResult:
    """Start a new checkpoint generation from a savepoint (refused while the job runs).

    ``sink_kind``/``sink_path`` override the sink job.json records (see core.sink.resolve_sink). Given the
    cluster's ``kafka_config`` and the job's ``group``, it is also refused while another consumer is a member of
    the group (ops.guard.ensure_group_unused); an upgrade's own rollback passes neither.
    """
    savepoint_id = _need_id(savepoint_id, "restore")
    home.require()
    sink = resolve_sink(sink_from_spec(home.spec()), sink_kind, sink_path)
    args = {"savepoint": savepoint_id, "drop_state": drop_state, "sink": sink.to_json() if sink else None}
    with recorded_operation(home, "restore", args, by=by) as record:
        ensure_not_running(home, kafka_config, group, operation="a restore")
        url = home.savepoint_url(savepoint_id)
        # Keeping state, the copy checks every file as it reads it: validating first would read them twice.
        manifest = validate_savepoint(url, home.storage_options) if drop_state else read_manifest(
            url, home.storage_options)
        record["before"] = {"generation": home.current_generation()}
        read_again = _read_again(home, manifest)
        # Dropping state restarts batch ids at 0; keeping it resumes after the savepoint's batch.
        next_batch = 0 if drop_state else manifest.batch_id + 1
        found = Refusals("the restore")
        found.check(ensure_sink_accepts, sink, next_batch, allow_sink_batch_log, home.storage_options)
        kafka = manifest.kafka_sources().require_any() if drop_state else None
        if kafka is not None:
            found.check(refuse_seeding_several_sources, kafka.indexes, f"savepoint {savepoint_id}")
        found.raise_any()
        if kafka is not None:
            offsets = to_nested(kafka.union())
            gen, checkpoint = home.new_generation("restore-drop-state", start_offsets=offsets,
                                                  from_savepoint=savepoint_id)
        else:
            gen, checkpoint = home.new_generation(
                "restore", from_savepoint=savepoint_id,
                populate=lambda target: restore_savepoint(url, target, home.storage_options))
        result = RestoreResult(SavepointInfo.of(manifest), gen, checkpoint, drop_state,
                               sink_note(sink) + rewind_note(home.announced_assets()), read_again)
        record["after"] = result.to_dict()
        return result


def _read_again(home: JobHome, manifest) -> int | None:
    """Records the restored job reads a second time (``core.offsets.records_read_again``); None when the current
    checkpoint has no committed position or the savepoint no Kafka offsets."""
    generation = home.current_generation()
    if generation is None:
        return None
    try:
        position = read_started_position(home.checkpoint_url(generation), home.storage_options)
        current = position.committed_kafka_offsets() if position is not None else None
        restored = manifest.kafka_sources().union()
    except StreamError as exc:  # a checkpoint or savepoint the count cannot read: the restore goes on without it
        log.warning("restore of %s: the records read again are not counted: %s", home.url, exc)
        return None
    return records_read_again(current, restored) if current is not None else None


def _need_id(savepoint_id: str | None, action: str) -> str:
    if not savepoint_id or not str(savepoint_id).strip():
        raise InvalidInputError(f"savepoint {action}: the setting savepoint_id is empty; give the id of one of the "
                                "job's savepoints (they are listed by savepoint list)", setting="savepoint_id")
    return savepoint_id


def show(home: JobHome, savepoint_id: str) -> SavepointInfo:
    """What a savepoint's manifest says (refused for an unknown id)."""
    savepoint_id = _need_id(savepoint_id, "show")
    home.require()
    return SavepointInfo.of(read_manifest(home.savepoint_url(savepoint_id), home.storage_options))


def validate(home: JobHome, savepoint_id: str) -> SavepointInfo:
    """Check every file of a savepoint against its manifest's checksums; SavepointError names the first bad one."""
    savepoint_id = _need_id(savepoint_id, "validate")
    home.require()
    manifest = validate_savepoint(home.savepoint_url(savepoint_id), home.storage_options)
    return replace(SavepointInfo.of(manifest), checksums_match=True)


def delete(home: JobHome, savepoint_id: str, by: str | None = None) -> DeleteResult:
    """Delete one savepoint (refused for an unknown or pinned id)."""
    savepoint_id = _need_id(savepoint_id, "delete")
    with recorded_operation(home, "savepoint-delete", {"savepoint": savepoint_id}, by=by) as record:
        read_manifest(home.savepoint_url(savepoint_id), home.storage_options)  # refuses unknown ids
        reason = pins(home).get(savepoint_id)
        if reason:
            raise JobStateError(f"savepoint {savepoint_id} is pinned ({reason}); it is deleted once that is over")
        delete_savepoint(home.savepoint_url(savepoint_id), home.storage_options)
        record["after"] = {"deleted": savepoint_id}
    return DeleteResult(savepoint_id)


def prune(home: JobHome, keep_last: int | None = None, max_age: timedelta | str | None = None,
          now: datetime | None = None, by: str | None = None) -> PruneResult:
    """Delete the savepoints the retention policy lets go; never the newest, never a pinned one.

    ``max_age`` is a timedelta or an ISO 8601 duration (``P7D``), see :func:`retention`.
    A savepoint is pinned while an upgrade may roll back to it (see ``pin``).
    """
    keep_last, max_age = retention(keep_last, max_age)
    args = {"keep_last": keep_last, "max_age": str(max_age) if max_age is not None else None}
    with recorded_operation(home, "savepoint-prune", args, by=by) as record:
        pinned = pins(home)
        deleted = prune_savepoints(home.savepoints_url, now or datetime.now(UTC), keep_last=keep_last,
                                   max_age=max_age, storage_options=home.storage_options, keep=pinned)
        result = PruneResult(deleted, sorted(pinned))
        record["after"] = result.to_dict()
        return result


def retention(keep_last: int | None, max_age: timedelta | str | None) -> tuple[int | None, timedelta | None]:
    """A retention policy as the CLI and the housekeeping operator give it, checked: ``(keep_last, max_age)``.

    ``keep_last`` must be a whole number >= 1; ``max_age`` an ISO 8601 duration (``P7D``) or a timedelta;
    at least one of them says what to keep.
    """
    if keep_last is not None and not isinstance(keep_last, int):  # a bool is refused by check_retention
        raise InvalidInputError(f"keep_last must be a whole number >= 1 (the newest is always kept), got "
                                f"{keep_last!r}", setting="keep_last")
    check_retention(keep_last, max_age)
    if isinstance(max_age, str):
        max_age = parse_duration(max_age, "max_age")
    return keep_last, max_age


def check_retention(keep_last: int | None, max_age: object | None) -> None:
    """A retention policy must say what to keep, and keep at least the newest savepoint."""
    if keep_last is None and max_age is None:
        raise InvalidInputError("say what to keep: keep_last (the newest N) and/or max_age (e.g. P7D)",
                                setting="keep_last")
    if keep_last is not None and (isinstance(keep_last, bool) or keep_last < 1):
        raise InvalidInputError(f"keep_last must be at least 1 (the newest is always kept), got {keep_last!r}",
                                setting="keep_last")


def pins(home: JobHome) -> dict[str, str]:
    """Savepoints that must not be pruned, each with why (an upgrade in progress may roll back to it)."""
    return home.pins()


def pin(home: JobHome, savepoint_id: str, reason: str, by: str | None = None) -> None:
    """Keep ``savepoint_id`` out of pruning until :func:`unpin` (an upgrade may roll back to it)."""
    home.savepoint_url(savepoint_id)  # refuses a malformed id
    with recorded_operation(home, "savepoint-pin", {"savepoint": savepoint_id, "reason": reason}, by=by) as record:
        home.write_pins({**home.pins(), savepoint_id: reason})
        record["after"] = {"pinned": savepoint_id}


def unpin(home: JobHome, savepoint_id: str, by: str | None = None) -> None:
    """Let housekeeping prune ``savepoint_id`` again (its upgrade is decided)."""
    with recorded_operation(home, "savepoint-unpin", {"savepoint": savepoint_id}, by=by) as record:
        held = home.pins()
        if held.pop(savepoint_id, None) is not None:
            home.write_pins(held)
        record["after"] = {"pinned": sorted(held)}
