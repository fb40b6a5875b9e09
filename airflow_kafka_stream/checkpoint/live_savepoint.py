"""Copies of a running query's checkpoint: live savepoints, and the scratch copies an upgrade rehearses on.

:func:`copy_live_checkpoint` copies what one committed batch needs (the rules and their reasons are in
:mod:`airflow_kafka_stream.core.live_copy`) while the query keeps running: it reads files, never writes
or locks anything in the checkpoint, so the job's batches do not wait for it. Each attempt

1. reads the position (the newest batch ``B`` with ``offsets/B`` and ``commits/B``, or the batch asked),
2. lists the files batch ``B`` needs, with their sizes, and copies them in bounded chunks (a RocksDB
   base ``.zip`` first, then the SST files its metadata lists, read from the copy just made),
3. checks that every copied file is still in the checkpoint with the size it was listed with.

Spark writes each checkpoint file under a temporary name and renames it into place, and never rewrites a
committed batch's files: a file still there with the same size holds the bytes that were copied. Spark's
state maintenance deletes old state files in the background; a file that vanished mid-copy
(FileNotFoundError) or fails the check fails the attempt: its partial copy is removed and the copy is
tried again, at the newest batch when none was asked. After the last attempt SavepointError is raised,
and nothing of the copy is left.

:func:`create_live_savepoint` writes the copy's manifest last (``live: true``), as every savepoint's.
"""

from __future__ import annotations

import logging
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import fsspec

from airflow_kafka_stream.checkpoint.atomic import (
    atomic_write,
    exists_file,
    is_dir,
    is_local,
    join,
    list_names,
    open_fs,
)
from airflow_kafka_stream.checkpoint.file_copy import Pace, copy_file
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.savepoints import StepHook
from airflow_kafka_stream.core.checkpoint_fsck import state_version_file
from airflow_kafka_stream.core.checkpoint_log import (
    COMMITS_DIR,
    METADATA,
    OFFSETS_DIR,
    SOURCES_DIR,
    STATE_DIR,
    OffsetLogEntry,
    parse_offset_log,
    parse_query_metadata,
)
from airflow_kafka_stream.core.live_copy import (
    StaleCopy,
    changed_files,
    log_files,
    other_state_file,
    rocksdb_shared_files,
    skipped,
    store_files,
)
from airflow_kafka_stream.core.savepoint_manifest import MANIFEST, Manifest, render_manifest
from airflow_kafka_stream.errors import JobStateError, SavepointError

log = logging.getLogger(__name__)

#: Where a copy goes: a URL, or a function of the batch copied (a savepoint's id names its batch).
Target = str | Callable[[int], str]

#: Attempts before a copy that keeps racing Spark's state maintenance is given up.
DEFAULT_ATTEMPTS = 4
#: Pause between attempts (a new batch or the maintenance's next pass settles what changed).
RETRY_PAUSE_SECONDS = 0.5
#: The share of its time a live savepoint's copy of a running job's checkpoint works; it rests the rest
#: (``file_copy.Pace``). On two cores, savepoints taken back to back slowed the job's batches by 23% working all the
#: time, by 11-16% at half, 11% at a third and 0-5% at a quarter, while each savepoint took 0.08, 0.3-0.4, 0.6 and
#: 0.6-1.0 s (docs/savepoints.md): a quarter keeps the bar of 10%. An upgrade's rehearsal copies at its own share.
LIVE_COPY_SHARE = 0.25


@dataclass(frozen=True)
class LiveCopy:
    """A finished copy: the batch it holds, each file's sha256 (relative path), and that batch's offsets."""

    target_url: str
    batch_id: int
    #: State version the copy loads (``batch_id + 1``).
    state_version: int
    query_id: str
    offsets: OffsetLogEntry
    #: ``offsets/B+1`` when it was asked for (a batch Spark re-runs from the copy), else None.
    next_offsets: OffsetLogEntry | None
    state_store_provider: str | None
    stateful: bool
    files: dict[str, str]
    attempts: int


def copy_live_checkpoint(
    checkpoint_url: str,
    target: Target,
    storage_options: dict | None = None,
    batch_id: int | None = None,
    *,
    next_offsets: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    retry_pause: float = RETRY_PAUSE_SECONDS,
    step_hook: StepHook | None = None,
    share: float = LIVE_COPY_SHARE,
) -> LiveCopy:
    """Copy committed batch ``batch_id`` (default: the newest) of a possibly running query into ``target``.

    The copy is a checkpoint Spark resumes from after that batch, with its state (version ``batch_id + 1``).
    With ``next_offsets`` the committed ``offsets/batch_id+1`` is copied too, without its commit: Spark then
    re-runs that batch from the copy on the state it started from (an upgrade rehearsal takes ``batch_id =
    N - 1`` and this, to run the new code on batch N's records). ``target`` must be empty or absent; a
    function of the batch id names it per attempt. Nothing is written to the checkpoint. The copy works
    ``share`` of its time and rests the rest, so the running job's batches keep most of the host; an attempt
    after one that raced Spark's cleanup works twice the share of the one before, up to all of its time.

    Raises JobStateError when there is no such committed batch (or an offset append was interrupted), and
    SavepointError when the attempts ran out; either way nothing of the copy remains.
    """
    hook = step_hook or (lambda _step: None)
    fs, root = open_fs(checkpoint_url, storage_options)
    failures: list[str] = []
    for attempt in range(1, max(attempts, 1) + 1):
        # An attempt that raced Spark's cleanup of old batches was too slow for the job's retention: each next one
        # works twice the share of its time, up to all of it, so a gentle copy never makes a savepoint impossible.
        pace = Pace(min(1.0, share * 2 ** (attempt - 1)))
        batch = _batch_to_copy(checkpoint_url, storage_options, batch_id, next_offsets)
        target_url = target(batch) if callable(target) else target
        target_fs, target_root = open_fs(target_url, storage_options)
        _require_empty(target_fs, target_root, target_url)
        try:
            copied = _attempt(fs, root, target_fs, target_root, batch, next_offsets, hook, pace)
        except (StaleCopy, FileNotFoundError) as exc:
            _remove(target_fs, target_root)
            failures.append(f"attempt {attempt} at batch {batch}: {_reason(exc)}")
            log.info("live copy of %s: %s; %s", checkpoint_url, failures[-1],
                     "trying again" if attempt < attempts else "giving up")
            hook(f"failed:{attempt}")
            time.sleep(retry_pause)
            continue
        except BaseException:
            _remove(target_fs, target_root)
            raise
        return _finished(storage_options, target_url, batch, copied, next_offsets, attempt)
    raise SavepointError(
        f"{checkpoint_url}: every attempt to copy the running query's checkpoint raced Spark's state maintenance, "
        f"which deleted files the copy needed ({'; '.join(failures)}); nothing was kept. Try again, or keep more "
        "state versions (the job's Spark setting spark.sql.streaming.minBatchesToRetain) so that a copy has time "
        "to finish")


def _batch_to_copy(url: str, storage_options: dict | None, batch_id: int | None, next_offsets: bool) -> int:
    position = read_position(url, storage_options)
    if position.incomplete_append is not None:
        raise JobStateError(f"{url}: an offset append was interrupted; run `airflow-kafka-stream checkpoint repair` "
                            "on the stopped job first")
    if position.batch_id is None:
        raise JobStateError(f"{url}: the query has not committed a batch yet, so there is nothing to copy; wait for "
                            "its first batch to commit and try again")
    batch = position.batch_id if batch_id is None else batch_id
    newest = position.batch_id - (1 if next_offsets else 0)
    if batch < 0 or batch > newest:
        wanted = f"batch {batch}" + (f" and batch {batch + 1}'s offsets" if next_offsets else "")
        raise JobStateError(f"{url}: {wanted} are not committed (the newest committed batch is "
                            f"{position.batch_id}); ask for a batch up to {newest}")
    return batch


def _require_empty(fs: fsspec.AbstractFileSystem, root: str, url: str) -> None:
    if fs.exists(root) and list_names(fs, root):
        raise SavepointError(f"{url} already exists and is not empty; a copy is made only into a new location "
                             "(savepoints are never overwritten)")


def _attempt(fs: fsspec.AbstractFileSystem, root: str, target_fs: fsspec.AbstractFileSystem, target: str,
             batch: int, next_offsets: bool, hook: StepHook, pace: Pace) -> tuple[dict[str, str], dict[str, int]]:
    """One copy of batch ``batch``: the files and sha256 copied, and the sizes they were listed with."""
    previous = batch >= 1 and exists_file(fs, join(root, OFFSETS_DIR, str(batch - 1)))
    if batch >= 1 and not previous and exists_file(fs, join(root, COMMITS_DIR, str(batch + 1))):
        raise StaleCopy(f"offsets/{batch - 1} was purged as newer batches committed")  # Spark resumes with it
    pace.start()  # the listing, every copy and the check are paced: all of it is work the job's host does
    logs = log_files(batch, previous, next_offsets)
    listed = {relative: _size(fs, join(root, relative)) for relative in [METADATA, *logs]}
    listed.update(_tree_sizes(fs, root, SOURCES_DIR))
    state = _tree_sizes(fs, root, STATE_DIR)
    pace.rest()
    hook("listed")
    files: dict[str, str] = {}

    def copy(relative: str) -> None:
        files[relative] = copy_file(fs, join(root, relative), target_fs, join(target, relative), pace)
        hook(f"copy:{relative}")

    for relative in [*logs, METADATA, *sorted(r for r in listed if r.startswith(f"{SOURCES_DIR}/"))]:
        copy(relative)  # the logs first: Spark purges old batches' files quickly under a small retention
    if state:
        _copy_state(state, batch + 1, target_fs, target, listed, copy)
    found = changed_files(listed, {relative: _size_or_none(fs, join(root, relative)) for relative in listed})
    pace.rest()
    if found:
        raise StaleCopy(f"{len(found)} file(s) changed or vanished while they were copied: {', '.join(found[:5])}")
    hook("verified")
    return files, listed


def _copy_state(state: dict[str, int], version: int, target_fs: fsspec.AbstractFileSystem, target: str,
                listed: dict[str, int], copy: Callable[[str], None]) -> None:
    """Copy what loads state ``version`` in every store directory, then the operators' other files."""
    by_dir: dict[str, list[str]] = {}
    for relative in state:
        directory, _, name = relative.rpartition("/")
        by_dir.setdefault(directory, []).append(name)
    stores = sorted(d for d, names in by_dir.items() if any(state_version_file(n) for n in names))
    for store in stores:
        chosen = store_files(by_dir[store], version, store)
        for name in chosen.files:
            listed[f"{store}/{name}"] = state[f"{store}/{name}"]
            copy(f"{store}/{name}")
        if chosen.rocksdb_base is not None:
            for relative in _shared_files(target_fs, join(target, store, chosen.rocksdb_base), store):
                if relative not in state:
                    raise StaleCopy(f"{relative}, listed by {store}/{chosen.rocksdb_base}, is gone")
                listed[relative] = state[relative]
                copy(relative)
    for relative in sorted(state):
        if other_state_file(relative, stores):
            listed[relative] = state[relative]
            copy(relative)


def _shared_files(target_fs: fsspec.AbstractFileSystem, zip_path: str, store: str) -> list[str]:
    """The SST/log files a RocksDB base lists, read from the copy just made (so they match what was copied)."""
    with target_fs.open(zip_path, "rb") as handle, zipfile.ZipFile(handle) as archive:
        text = archive.read("metadata").decode("utf-8")
    return [f"{store}/{name}" for name in rocksdb_shared_files(text, zip_path)]


def _tree_sizes(fs: fsspec.AbstractFileSystem, root: str, relative: str) -> dict[str, int]:
    """Size of every file under ``root/relative`` by relative path (checksum and temporary files left out)."""
    base = join(root, relative)
    if not is_dir(fs, base):
        return {}
    found: dict[str, Any] = fs.find(base, detail=True)
    return {path[len(root) + 1:]: int(info["size"]) for path, info in found.items()
            if info.get("type") != "directory" and not skipped(path.rsplit("/", 1)[-1])}


def _size(fs: fsspec.AbstractFileSystem, path: str) -> int:
    """A file's size; FileNotFoundError when it is gone (the attempt fails and is retried)."""
    return int(fs.info(path)["size"])


def _size_or_none(fs: fsspec.AbstractFileSystem, path: str) -> int | None:
    try:
        return _size(fs, path)
    except FileNotFoundError:
        return None


def _remove(fs: fsspec.AbstractFileSystem, root: str) -> None:
    """Remove a failed attempt's partial copy (a savepoint directory without a manifest must not remain)."""
    try:
        if fs.exists(root):
            fs.rm(root, recursive=True)
    except FileNotFoundError:
        pass
    if not is_local(fs):
        fs.invalidate_cache()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename or exc} vanished while it was copied"
    return str(exc)


def _finished(storage_options: dict | None, target_url: str, batch: int,
              copied: tuple[dict[str, str], dict[str, int]], next_offsets: bool, attempt: int) -> LiveCopy:
    """What the copy holds, read back from the copy itself."""
    files, _listed = copied
    fs, target = open_fs(target_url, storage_options)

    def offsets_of(log_batch: int) -> OffsetLogEntry:
        return parse_offset_log(fs.cat_file(join(target, OFFSETS_DIR, str(log_batch))), f"offsets/{log_batch}")

    offsets = offsets_of(batch)
    query_id = parse_query_metadata(fs.cat_file(join(target, METADATA)), METADATA)
    stateful = any(relative.startswith(f"{STATE_DIR}/") for relative in files)
    return LiveCopy(target_url, batch, batch + 1, query_id, offsets, offsets_of(batch + 1) if next_offsets else None,
                    offsets.state_store_provider, stateful, files, attempt)


def create_live_savepoint(
    checkpoint_url: str,
    savepoint_url_of: Callable[[int], str],
    app_version: str,
    created_at: datetime,
    spark_version: str | None = None,
    storage_options: dict | None = None,
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    step_hook: StepHook | None = None,
) -> Manifest:
    """A savepoint of the running query's newest committed batch; ``savepoint_url_of(batch)`` names it.

    The manifest (``live: true``) is written after the copy was checked, so the savepoint is complete or
    absent: a failure writing it removes the copy too.
    """
    hook = step_hook or (lambda _step: None)
    made = copy_live_checkpoint(checkpoint_url, savepoint_url_of, storage_options, attempts=attempts,
                                step_hook=hook)
    manifest = Manifest(
        savepoint_id=made.target_url.rstrip("/").rsplit("/", 1)[-1],
        query_id=made.query_id,
        batch_id=made.batch_id,
        source_lines=made.offsets.source_lines,
        state_store_provider=made.state_store_provider,
        stateful=made.stateful,
        app_version=app_version,
        created_at=created_at,
        spark_version=spark_version,
        files=made.files,
        live=True,
    )
    target_fs, target = open_fs(made.target_url, storage_options)
    try:
        atomic_write(target_fs, join(target, MANIFEST), render_manifest(manifest).encode("utf-8"))
    except BaseException:
        _remove(target_fs, target)
        raise
    hook("manifest")
    log.info("live savepoint %s of %s at batch %s: %s files, %s attempt(s)", made.target_url, checkpoint_url,
             made.batch_id, len(made.files), made.attempts)
    return manifest
