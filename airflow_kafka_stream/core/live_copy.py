"""Which files a copy of a *running* query's checkpoint takes, and how the copy is checked afterwards.

Pure rules for :mod:`airflow_kafka_stream.checkpoint.live_savepoint`. A running query keeps writing
while the copy reads: batch N+1's ``offsets``, state files of versions above N+1, new snapshots and
SST files appear, and Spark's state maintenance deletes old ones in the background. So the copy
takes exactly what one committed batch needs, never a file of a later batch, and afterwards checks
that each copied file is still there with the size it was listed with. Spark writes every checkpoint
file under a temporary name and renames it into place, and never rewrites a committed one: a file
that is still there with the same size holds the bytes that were copied.

For committed batch ``B`` (state version ``B + 1``, the state batch ``B`` wrote):

* ``metadata`` and everything under ``sources/``;
* ``offsets/B-1`` and ``commits/B-1`` when they exist (Spark 4.2 reads batch B-1's offsets to
  resume after B), ``offsets/B`` and ``commits/B``; optionally ``offsets/B+1`` alone (a batch to
  re-run, for a rehearsal), never an in-flight ``offsets/B+1`` in a savepoint;
* per state store directory the files Spark loads version ``B + 1`` from: the newest base at or
  below it (HDFS ``.snapshot``, RocksDB ``.zip``; none means an empty store) and every replay file
  after it (``.delta``, ``.changelog``), nothing of a later version; for a RocksDB ``.zip`` base
  the SST and archived log files its ``metadata`` lists (``SSTs/``, ``logs/``), no other;
* the other files under ``state/`` (operator metadata, state schemas), which are written once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_kafka_stream.core.checkpoint_fsck import crc_target, state_load, state_version_file
from airflow_kafka_stream.core.checkpoint_log import COMMITS_DIR, OFFSETS_DIR, is_temp_name
from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.errors import CheckpointFormatError, JobStateError, SavepointError

#: Sub-directories of a RocksDB store holding files shared by versions: copied only when a base lists them.
ROCKSDB_SHARED_DIRS = ("SSTs", "logs")


class StaleCopy(SavepointError):
    """A file the copy needs changed or vanished while it was copied (Spark's state maintenance deleted
    it, or a newer batch replaced what was listed); a new attempt at a newer batch may succeed."""


def skipped(name: str) -> bool:
    """Checksum and temporary files are never copied (Spark reads a log file without its ``.crc``)."""
    return crc_target(name) is not None or is_temp_name(name)


def log_files(batch_id: int, previous_exists: bool, next_offsets: bool = False) -> list[str]:
    """The ``offsets``/``commits`` files of a copy of committed batch ``batch_id``, in restore order
    (commits before offsets, older batch first; ``offsets/B+1`` without its commit last)."""
    files = []
    if previous_exists and batch_id >= 1:
        files += [f"{COMMITS_DIR}/{batch_id - 1}", f"{OFFSETS_DIR}/{batch_id - 1}"]
    files += [f"{COMMITS_DIR}/{batch_id}", f"{OFFSETS_DIR}/{batch_id}"]
    if next_offsets:
        files.append(f"{OFFSETS_DIR}/{batch_id + 1}")
    return files


@dataclass(frozen=True)
class StoreFiles:
    """What one state store directory contributes: version files, and the RocksDB base to read SSTs from."""

    files: tuple[str, ...]
    rocksdb_base: str | None


def store_files(names: Iterable[str], version: int, where: str) -> StoreFiles:
    """The version files of one store directory that load state ``version`` (names relative to it).

    Raises :class:`StaleCopy` when a replay file is missing (maintenance may have deleted it after a
    newer base was written; a retry lists again), and SavepointError for state files that carry unique
    ids (state checkpoint format version 2), whose lineage is in the commit log and not followed here.
    """
    names = [name for name in names if not skipped(name)]
    if any((parsed := state_version_file(name)) and parsed[2] for name in names):
        raise SavepointError(
            f"{where}: state files carry unique ids (spark.sql.streaming.stateStore.checkpointFormatVersion 2); "
            "a savepoint of the running job cannot tell which of them load a version: stop the job and take the "
            "savepoint then")
    load = state_load(names, version)
    if load.missing:
        raise StaleCopy(
            f"{where}: state version {version} cannot be rebuilt from what is there now: the base is "
            f"{load.base_name or 'an empty store'} and version file(s) {list(load.missing[:5])} after it are "
            "missing (Spark's state maintenance may have replaced them with a newer snapshot)")
    files = ((load.base_name,) if load.base_name else ()) + load.replay
    base = load.base_name if load.base_name and load.base_name.endswith(".zip") else None
    return StoreFiles(files, base)


def rocksdb_shared_files(metadata_text: str, where: str) -> list[str]:
    """The shared files a RocksDB ``N.zip`` lists in its ``metadata`` entry, relative to the store directory.

    The entry is ``v1`` and a JSON line with ``sstFiles`` (``dfsSstFileName``, under ``SSTs/``) and, when
    RocksDB archived write-ahead logs, ``logFiles`` (``dfsLogFileName``, under ``logs/``).
    """
    lines = metadata_text.split("\n", 1)
    if len(lines) != 2 or lines[0].strip() != "v1":
        raise CheckpointFormatError(f"{where}: RocksDB checkpoint metadata of version {lines[0][:20]!r}, "
                                    "expected v1; a Spark version this package does not know wrote it")
    try:
        info = json.loads(lines[1])
        files = [f"SSTs/{entry['dfsSstFileName']}" for entry in info.get("sstFiles") or []]
        files += [f"logs/{entry['dfsLogFileName']}" for entry in info.get("logFiles") or []]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointFormatError(f"{where}: unreadable RocksDB checkpoint metadata ({exc})") from exc
    return sorted(files)


def other_state_file(relative: str, store_dirs: Iterable[str]) -> bool:
    """Whether a file under ``state/`` that is no version file is copied as is (operator metadata, schemas).

    Shared RocksDB files (``<store>/SSTs/``, ``<store>/logs/``) are not: only those a base lists are.
    """
    directory, _, name = relative.rpartition("/")
    if skipped(name) or state_version_file(name) is not None:
        return False
    return not any(directory == f"{store}/{shared}" for store in store_dirs for shared in ROCKSDB_SHARED_DIRS)


def changed_files(listed: Mapping[str, int], observed: Mapping[str, int | None]) -> list[str]:
    """The files whose size now differs from the size they were listed (and copied) with, or that are gone
    (``None``). An empty list means every copied file is still what the checkpoint holds."""
    return sorted(path for path, size in listed.items() if observed.get(path) != size)


def live_savepoint_refusal(state: JobState | None, state_text: object, stop_requested: bool) -> JobStateError | None:
    """Why a savepoint of a *running* job (its driver alive) is refused now, None when it may be taken.

    Only a RUNNING job with no stop request is copied: a STARTING one may still be re-running an
    interrupted batch or reshaping its checkpoint, a DRAINING or stopping one is about to stop, and
    the savepoint its stop takes (``stop`` with ``savepoint``) is the one to have.
    """
    if stop_requested or state is JobState.DRAINING:
        return JobStateError(
            f"the job is stopping (state {state_text}, a stop was requested): a live savepoint is not taken while "
            "it drains. Take the savepoint with the stop (its savepoint option), or once it stopped")
    if state is JobState.STARTING:
        return JobStateError(
            "the job is STARTING (its query may still re-run an interrupted batch): a live savepoint is taken "
            "only once it runs; wait until its status says RUNNING and try again")
    if state is not JobState.RUNNING:
        return JobStateError(f"the job reports state {state_text!r}, not RUNNING: a live savepoint is refused; "
                             "look at its status, and stop it before taking a savepoint")
    return None
