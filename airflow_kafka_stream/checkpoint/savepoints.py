"""Savepoints: consistent, self-describing, immutable copies of a stopped query's checkpoint.

A savepoint holds ``metadata``, the last two batches' ``offsets``/``commits``
(Spark reads batch N-1's offsets as the committed start when it resumes after
batch N), ``sources/``, the state files needed to load state version N+1, and
``manifest.json`` with a sha256 per file. The manifest is written last, so a
directory without one is an incomplete savepoint: ignored by
:func:`list_savepoints`, removed by :func:`prune_savepoints`.

Restoring copies a savepoint into an empty checkpoint location, checking every
file against the manifest as it copies it. A marker file written first and
removed last makes an interrupted restore visible (the reader and fsck refuse
it; restoring again clears it).

Files are streamed in bounded chunks (:mod:`.file_copy`): creating, validating
and restoring a savepoint each read a file once, and hold a few MiB of it in
memory whatever its size.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

import fsspec

from airflow_kafka_stream.checkpoint.atomic import atomic_write, exists_file, is_dir, join, list_names, open_fs
from airflow_kafka_stream.checkpoint.file_copy import copy_file, hash_file
from airflow_kafka_stream.checkpoint.reader import CheckpointPosition, read_position
from airflow_kafka_stream.checkpoint.writer import state_store_dirs
from airflow_kafka_stream.core.checkpoint_log import (
    COMMITS_DIR,
    HDFS_PROVIDER,
    METADATA,
    OFFSETS_DIR,
    RESTORE_MARKER,
    SOURCES_DIR,
    STATE_DIR,
    state_file_version,
)
from airflow_kafka_stream.core.live_copy import skipped
from airflow_kafka_stream.core.retention import expired_savepoints
from airflow_kafka_stream.core.savepoint_manifest import (
    MANIFEST,
    Manifest,
    hdfs_state_files,
    parse_manifest,
    render_manifest,
)
from airflow_kafka_stream.errors import CheckpointFormatError, JobStateError, SavepointError

log = logging.getLogger(__name__)

StepHook = Callable[[str], None]


def _tree(fs: fsspec.AbstractFileSystem, root: str, relative: str) -> list[str]:
    """Relative paths of every file under ``root/relative``, without checksum or temp files."""
    base = join(root, relative)
    if not is_dir(fs, base):
        return []
    found = fs.find(base)
    return sorted(
        path[len(root) + 1 :] for path in found if not skipped(path.rsplit("/", 1)[-1]) and not path.endswith("/")
    )


def _state_paths(fs: fsspec.AbstractFileSystem, root: str, position: CheckpointPosition) -> list[str]:
    everything = _tree(fs, root, STATE_DIR)
    if position.state_store_provider != HDFS_PROVIDER:
        return everything  # RocksDB or unknown: the whole state directory, to be safe
    version = position.batch_id + 1  # type: ignore[operator]
    wanted = [path for path in everything if state_file_version(path.rsplit("/", 1)[-1]) is None]
    for store in state_store_dirs(fs, join(root, STATE_DIR)):
        relative = store[len(root) + 1 :]
        wanted += [f"{relative}/{name}" for name in hdfs_state_files(list_names(fs, store), version, store)]
    return sorted(wanted)


def _checkpoint_files(fs: fsspec.AbstractFileSystem, root: str, position: CheckpointPosition) -> list[str]:
    """Relative paths to copy, in restore order: metadata, sources, state, then the logs (newest last)."""
    batch = position.batch_id
    logs = []
    for log_batch in (batch - 1, batch):  # type: ignore[operator]
        if log_batch >= 0 and exists_file(fs, join(root, OFFSETS_DIR, str(log_batch))):
            logs += [f"{COMMITS_DIR}/{log_batch}", f"{OFFSETS_DIR}/{log_batch}"]
    state = _state_paths(fs, root, position) if position.stateful else []
    return [METADATA, *_tree(fs, root, SOURCES_DIR), *state, *logs]


def create_savepoint(
    checkpoint_url: str,
    savepoint_url: str,
    app_version: str,
    created_at: datetime,
    spark_version: str | None = None,
    storage_options: dict | None = None,
    *,
    step_hook: StepHook | None = None,
    exclude_in_flight: bool = False,
) -> Manifest:
    """Copy a stopped query's checkpoint into ``savepoint_url`` (its id is the last path component).

    ``exclude_in_flight`` saves the last committed batch of a query stopped mid-batch (a kill): the
    cancelled batch's offsets are not copied and HDFS state is taken at the committed version.
    """
    hook = step_hook or (lambda _step: None)
    position = read_position(checkpoint_url, storage_options)
    if position.incomplete_append is not None:
        raise JobStateError(f"{checkpoint_url}: an offset append was interrupted; run `airflow-kafka-stream checkpoint repair` first")
    if position.in_flight_batch_id is not None and not exclude_in_flight:
        raise JobStateError(
            f"{checkpoint_url}: batch {position.in_flight_batch_id} is in flight, so the checkpoint is not "
            "consistent; stop the job gracefully (drain) and take the savepoint after it stopped"
        )
    if position.batch_id is None:
        raise JobStateError(f"{checkpoint_url}: no committed batch yet; nothing to save")
    fs, root = open_fs(checkpoint_url, storage_options)
    target_fs, target = open_fs(savepoint_url, storage_options)
    if target_fs.exists(target) and list_names(target_fs, target):
        raise SavepointError(
            f"{savepoint_url} already exists and is not empty; savepoints are never overwritten: "
            "choose a new savepoint id (or delete the incomplete one with prune_savepoints)"
        )
    files: dict[str, str] = {}
    for relative in _checkpoint_files(fs, root, position):
        try:
            files[relative] = copy_file(fs, join(root, relative), target_fs, join(target, relative))
        except FileNotFoundError as exc:
            raise CheckpointFormatError(
                f"{join(root, relative)}: file missing; restore the checkpoint from a savepoint"
            ) from exc
        hook(f"copy:{relative}")
    manifest = Manifest(
        savepoint_id=target.rsplit("/", 1)[-1],
        query_id=position.query_id,
        batch_id=position.batch_id,
        source_lines=position.offsets.source_lines,  # type: ignore[union-attr]
        state_store_provider=position.state_store_provider,
        stateful=position.stateful,
        app_version=app_version,
        created_at=created_at,
        spark_version=spark_version,
        files=files,
    )
    atomic_write(target_fs, join(target, MANIFEST), render_manifest(manifest).encode("utf-8"))
    hook("manifest")
    log.info("savepoint %s of %s at batch %s: %s files", savepoint_url, checkpoint_url, position.batch_id, len(files))
    return manifest


def read_manifest(savepoint_url: str, storage_options: dict | None = None) -> Manifest:
    fs, root = open_fs(savepoint_url, storage_options)
    path = join(root, MANIFEST)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError as exc:
        raise SavepointError(
            f"{savepoint_url}: no {MANIFEST}, so the savepoint does not exist or is incomplete "
            "(an interrupted create); pick another savepoint"
        ) from exc
    return parse_manifest(data, path)


def validate_savepoint(savepoint_url: str, storage_options: dict | None = None) -> Manifest:
    """The manifest, after checking every file's sha256; SavepointError naming the first bad file."""
    manifest = read_manifest(savepoint_url, storage_options)
    fs, root = open_fs(savepoint_url, storage_options)
    for relative, expected in sorted(manifest.files.items()):
        path = join(root, relative)
        try:
            actual = hash_file(fs, path)
        except FileNotFoundError as exc:
            raise _missing(path) from exc
        _check_sha(path, actual, expected)
    return manifest


def _missing(path: str) -> SavepointError:
    return SavepointError(f"{path}: file listed in the manifest is missing; the savepoint is damaged")


def _check_sha(path: str, actual: str, expected: str) -> None:
    if actual != expected:
        raise SavepointError(
            f"{path}: sha256 {actual} does not match the manifest's {expected}; the savepoint is damaged, "
            "restore from another one"
        )


def list_savepoints(root_url: str, storage_options: dict | None = None) -> list[Manifest]:
    """Complete savepoints under ``root_url``, oldest first (directories without a manifest are skipped)."""
    fs, root = open_fs(root_url, storage_options)
    fs.invalidate_cache()
    manifests = []
    for name in list_names(fs, root):
        path = join(root, name, MANIFEST)
        if exists_file(fs, path):
            manifests.append(parse_manifest(fs.cat_file(path), path))
    return sorted(manifests, key=lambda manifest: (manifest.created_at, manifest.savepoint_id))


def incomplete_savepoints(root_url: str, storage_options: dict | None = None) -> list[str]:
    """Ids of savepoint directories without a manifest (interrupted creates or deletes)."""
    fs, root = open_fs(root_url, storage_options)
    return sorted(
        name
        for name in list_names(fs, root)
        if is_dir(fs, join(root, name)) and not exists_file(fs, join(root, name, MANIFEST))
    )


def delete_savepoint(savepoint_url: str, storage_options: dict | None = None) -> None:
    """Delete a savepoint: its manifest first, so an interrupted delete leaves an incomplete one."""
    fs, root = open_fs(savepoint_url, storage_options)
    if exists_file(fs, join(root, MANIFEST)):
        fs.rm_file(join(root, MANIFEST))
    if fs.exists(root):
        fs.rm(root, recursive=True)


def prune_savepoints(
    root_url: str,
    now: datetime,
    keep_last: int | None = None,
    max_age: timedelta | None = None,
    storage_options: dict | None = None,
    keep: Iterable[str] = (),
) -> list[str]:
    """Delete incomplete savepoints and those the retention policy lets go (never one in ``keep``)."""
    manifests = list_savepoints(root_url, storage_options)
    doomed = incomplete_savepoints(root_url, storage_options) + expired_savepoints(
        [(manifest.savepoint_id, manifest.created_at) for manifest in manifests], now, keep_last, max_age, keep
    )
    for savepoint_id in doomed:
        delete_savepoint(join(root_url.rstrip("/"), savepoint_id), storage_options)
    return doomed


def restore_savepoint(
    savepoint_url: str,
    new_checkpoint_url: str,
    storage_options: dict | None = None,
    *,
    step_hook: StepHook | None = None,
) -> Manifest:
    """Copy a savepoint into an empty checkpoint location; Spark resumes after its batch.

    Each file is read once: copied and checked against the manifest's sha256 in the same
    pass. A damaged savepoint raises SavepointError after removing what the restore
    wrote, the (empty) location included.
    """
    hook = step_hook or (lambda _step: None)
    manifest = read_manifest(savepoint_url, storage_options)
    source_fs, source = open_fs(savepoint_url, storage_options)
    fs, target = open_fs(new_checkpoint_url, storage_options)
    existing = list_names(fs, target) if fs.exists(target) else []
    if existing and RESTORE_MARKER not in existing:
        raise JobStateError(
            f"{new_checkpoint_url} is not empty ({len(existing)} entries); restore only into a new, empty "
            "checkpoint location (a new checkpoint generation)"
        )
    if existing:
        log.warning("clearing the interrupted restore in %s", new_checkpoint_url)
        for name in existing:
            if name != RESTORE_MARKER:
                fs.rm(join(target, name), recursive=True)
    marker = join(target, RESTORE_MARKER)
    atomic_write(fs, marker, render_manifest(manifest).encode("utf-8"))
    hook("marker")
    try:
        for relative in _restore_order(manifest):
            path = join(source, relative)
            try:
                actual = copy_file(source_fs, path, fs, join(target, relative))
            except FileNotFoundError as exc:
                raise _missing(path) from exc
            _check_sha(path, actual, manifest.files[relative])
            hook(f"copy:{relative}")
    except SavepointError:
        _remove_copies(fs, target)
        raise
    fs.rm_file(marker)
    hook("done")
    log.info("restored savepoint %s into %s at batch %s", savepoint_url, new_checkpoint_url, manifest.batch_id)
    return manifest


def _remove_copies(fs: fsspec.AbstractFileSystem, target: str) -> None:
    """Undo a restore that found the savepoint damaged. The marker goes last, so a crash meanwhile
    still shows an interrupted restore (which the next restore clears)."""
    for name in list_names(fs, target):
        if name != RESTORE_MARKER:
            fs.rm(join(target, name), recursive=True)
    fs.rm_file(join(target, RESTORE_MARKER))
    if fs.exists(target):
        fs.rm(target, recursive=True)


def _restore_order(manifest: Manifest) -> list[str]:
    """Everything but the logs first, then commits before offsets, older batch first."""
    logs = [path for path in manifest.files if path.startswith((f"{OFFSETS_DIR}/", f"{COMMITS_DIR}/"))]
    others = sorted(path for path in manifest.files if path not in logs)
    return others + sorted(logs, key=lambda path: (int(path.rsplit("/", 1)[-1]), path))


def sink_batch_log(sink_path: str, storage_options: dict | None = None) -> bool:
    """Whether ``sink_path`` is a file sink output with its own batch log (``_spark_metadata``).

    A fresh checkpoint restarts batch ids at 0, and such a sink silently skips
    batches it believes it already wrote: the caller must refuse unless told.
    """
    fs, root = open_fs(sink_path, storage_options)
    return is_dir(fs, join(root, "_spark_metadata"))


def sink_log_latest_batch(sink_path: str, storage_options: dict | None = None) -> int | None:
    """The newest batch id in a file sink's ``_spark_metadata`` log (``N`` or ``N.compact``), None if none."""
    fs, root = open_fs(sink_path, storage_options)
    ids = [int(name.split(".")[0]) for name in list_names(fs, join(root, "_spark_metadata"))
           if name.split(".")[0].isdigit() and name.count(".") <= 1 and not name.startswith(".")]
    return max(ids, default=None)
