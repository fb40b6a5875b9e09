"""Append a batch to a checkpoint so Spark resumes at new source offsets (offset resets).

Spark starts the batch after the newest committed one, reading from that
batch's end offsets. Appending ``offsets/N+1`` (metadata copied from
``offsets/N``, the chosen source offsets) and ``commits/N+1`` (copy of
``commits/N``) therefore moves the query without touching an existing file.
Two more things move with the batch id:

* HDFS state store: batch N+1 must find state version N+2. A copy of version
  N+1's file under the name N+2 makes them equal (a delta's puts and removes
  are idempotent when replayed over the state they produced).
* File sink: ``<output>/_spark_metadata/N+1`` must exist (``v1`` only, or the
  compacted log on a compaction batch) or the sink's next compaction fails.

Crash safety: a journal (``_append_in_progress.json``) is written first and
removed last. Spark would re-run an ``offsets/N+1`` without commit as a batch
over the wrong range, so the journal lets :func:`recover_incomplete_append`
(run by the next append, and by whoever starts the job) finish an append
whose offsets file was written, or roll back one that stopped before it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import fsspec

from airflow_kafka_stream.checkpoint.atomic import atomic_write, exists_file, is_dir, join, list_names, open_fs
from airflow_kafka_stream.checkpoint.reader import CheckpointPosition, read_bytes, read_position
from airflow_kafka_stream.core.checkpoint_log import (
    APPEND_JOURNAL,
    COMMITS_DIR,
    HDFS_PROVIDER,
    OFFSETS_DIR,
    STATE_DIR,
    compact_sink_entries,
    is_compaction_batch,
    render_offset_log,
    state_file_version,
)
from airflow_kafka_stream.core.offsets import PartitionOffsets, render_offsets_json
from airflow_kafka_stream.errors import CheckpointFormatError, InvalidInputError, JobStateError

log = logging.getLogger(__name__)

#: The write steps of an append, in order; a step hook is called after each with its name.
APPEND_STEPS = ("journal", "state", "offsets", "sink", "commit", "done")

StepHook = Callable[[str], None]


@dataclass(frozen=True)
class AppendResult:
    """What an append wrote: the new batch id, the source lines it replaced (by index) and the files created."""

    batch_id: int
    previous_batch_id: int
    source_lines: dict[int, str]
    state_files: tuple[str, ...]
    sink_entry: str | None

    @property
    def source_index(self) -> int:
        return min(self.source_lines)

    @property
    def source_line(self) -> str:
        return self.source_lines[self.source_index]


def append_batch(
    url: str,
    new_offsets: PartitionOffsets | None = None,
    source_index: int = 0,
    sink_metadata_path: str | None = None,
    storage_options: dict | None = None,
    *,
    source_line: str | None = None,
    sources: Mapping[int, PartitionOffsets] | None = None,
    sink_compact_interval: int = 10,
    step_hook: StepHook | None = None,
) -> AppendResult:
    """Make the query resume at ``new_offsets`` for source ``source_index`` on its next start.

    ``sources`` gives Kafka offsets for several sources at once (source index ->
    offsets; a query that unions Kafka readers), all written in the one appended
    batch; ``source_line`` replaces the source's line verbatim (for non-Kafka
    sources). Lines not named keep their value. ``sink_metadata_path`` is the
    file sink's output path, when the query writes to one.
    ``sink_compact_interval`` must match the query's
    ``spark.sql.streaming.fileSink.log.compactInterval`` (Spark's default 10).
    The job must be stopped: appending under a running query corrupts it.
    """
    lines = _new_lines(new_offsets, source_index, source_line, sources)
    recover_incomplete_append(url, storage_options)
    fs, root = open_fs(url, storage_options)
    position = read_position(url, storage_options)
    _check_appendable(position, lines)
    hook = step_hook or (lambda _step: None)
    batch = position.batch_id + 1  # type: ignore[operator]
    entry = position.offsets  # type: ignore[union-attr]
    for index, line in sorted(lines.items()):
        entry = entry.with_source_line(index, line)  # type: ignore[union-attr]
    offsets_text = render_offset_log(entry).encode("utf-8")  # type: ignore[arg-type]
    state_copies = _plan_state_copies(fs, root, position) if position.stateful else []
    sink_entry = _sink_entry_path(sink_metadata_path, batch, sink_compact_interval, storage_options)
    # The digest covers the whole offsets file, every source line included: recovery finishes only our own write.
    journal = {
        "batch_id": batch,
        "previous_batch_id": position.batch_id,
        "offsets_sha256": hashlib.sha256(offsets_text).hexdigest(),
        "state_files": [target for _source, target in state_copies],
        "sink_entry": sink_entry,
        "sink_compact_interval": sink_compact_interval,
    }
    atomic_write(fs, join(root, APPEND_JOURNAL), json.dumps(journal, indent=1).encode("utf-8"))
    hook("journal")
    for source, target in state_copies:
        atomic_write(fs, target, read_bytes(fs, source))
    hook("state")
    atomic_write(fs, join(root, OFFSETS_DIR, str(batch)), offsets_text)
    hook("offsets")
    _finish(fs, root, journal, sink_metadata_path, storage_options, hook)
    log.info("appended batch %s to %s: source lines %s", batch, url, lines)
    return AppendResult(batch, batch - 1, lines, tuple(target for _s, target in state_copies), sink_entry)


def _new_lines(new_offsets: PartitionOffsets | None, source_index: int, source_line: str | None,
               sources: Mapping[int, PartitionOffsets] | None) -> dict[int, str]:
    """The replacement line of every source the append changes, validated before anything is read."""
    if sum(given is not None for given in (new_offsets, source_line, sources)) != 1:
        raise InvalidInputError(
            "give exactly one of new_offsets (Kafka offsets), sources (Kafka offsets per source index) "
            "or source_line (raw offsets JSON)"
        )
    if source_line is not None:
        return {source_index: source_line}
    by_index = dict(sources) if sources is not None else {source_index: new_offsets}
    if not by_index or not any(by_index.values()):
        raise InvalidInputError("the new offsets are empty; give the offset of every partition the query reads")
    for offsets in by_index.values():
        if any(offset < 0 for offset in offsets.values()):  # type: ignore[union-attr]
            raise InvalidInputError(
                "new offsets must be concrete offsets >= 0; resolve earliest/latest against the topic first"
            )
    return {index: render_offsets_json(offsets) for index, offsets in by_index.items()}  # type: ignore[arg-type]


def recover_incomplete_append(url: str, storage_options: dict | None = None) -> str | None:
    """Finish or roll back an append interrupted by a crash; returns "finished", "rolled back" or None.

    Finished when its ``offsets/N+1`` was written (the rest is idempotent),
    rolled back (its state copies removed) when it stopped before that.
    Call it before starting a query on a checkpoint that may hold one.
    """
    fs, root = open_fs(url, storage_options)
    journal_path = join(root, APPEND_JOURNAL)
    if not exists_file(fs, journal_path):
        return None
    try:
        journal = json.loads(read_bytes(fs, journal_path))
        batch = int(journal["batch_id"])
        if not isinstance(journal["offsets_sha256"], str) or int(journal["previous_batch_id"]) != batch - 1:
            raise ValueError("inconsistent journal")
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointFormatError(
            f"{journal_path}: unreadable append journal; inspect offsets/ and commits/ for the last batch "
            "and delete the journal by hand"
        ) from exc
    offsets_path = join(root, OFFSETS_DIR, str(batch))
    if exists_file(fs, offsets_path):
        written = hashlib.sha256(read_bytes(fs, offsets_path)).hexdigest()
        if written != journal["offsets_sha256"]:
            log.warning("%s was written by Spark, not by the interrupted append; dropping the journal", offsets_path)
            fs.rm_file(journal_path)
            return "rolled back"
        _finish(fs, root, journal, _sink_root(journal.get("sink_entry")), storage_options, lambda _step: None)
        log.warning("finished the interrupted append of batch %s in %s", batch, url)
        return "finished"
    for target in journal.get("state_files", []):
        if exists_file(fs, target):
            fs.rm_file(target)
    fs.rm_file(journal_path)
    log.warning("rolled back the interrupted append of batch %s in %s", batch, url)
    return "rolled back"


def _finish(
    fs: fsspec.AbstractFileSystem,
    root: str,
    journal: dict,
    sink_path: str | None,
    storage_options: dict | None,
    hook: StepHook,
) -> None:
    batch, previous = int(journal["batch_id"]), int(journal["previous_batch_id"])
    if journal.get("sink_entry"):
        _write_sink_entry(sink_path, batch, int(journal.get("sink_compact_interval", 10)), storage_options)
    hook("sink")
    commit_path = join(root, COMMITS_DIR, str(batch))
    if not exists_file(fs, commit_path):
        atomic_write(fs, commit_path, read_bytes(fs, join(root, COMMITS_DIR, str(previous))))
    hook("commit")
    fs.rm_file(join(root, APPEND_JOURNAL))
    hook("done")


def _check_appendable(position: CheckpointPosition, lines: Mapping[int, str]) -> None:
    if position.in_flight_batch_id is not None:
        raise JobStateError(
            f"{position.url}: batch {position.in_flight_batch_id} is in flight (offsets without commit); "
            "the job may be running. Stop it gracefully (or let it finish that batch) before changing offsets"
        )
    if position.batch_id is None:
        raise JobStateError(
            f"{position.url}: no committed batch yet, so there is no position to move; "
            "start the query from the wanted offsets instead (a fresh checkpoint's startingOffsets)"
        )
    for index in lines:
        position.offsets.source_value(index)  # type: ignore[union-attr]  # raises on a bad index
    if position.stateful and position.state_store_provider != HDFS_PROVIDER:
        raise JobStateError(
            f"{position.url}: the query keeps state in {position.state_store_provider or 'an unknown store'}, "
            "whose files cannot be moved to a new batch safely; drop the state instead "
            "(start a new checkpoint generation at the new offsets)"
        )


def _plan_state_copies(fs: fsspec.AbstractFileSystem, root: str, position: CheckpointPosition) -> list[tuple[str, str]]:
    """(source, target) pairs making every store's version N+2 equal to version N+1."""
    current, target_version = position.batch_id + 1, position.batch_id + 2  # type: ignore[operator]
    copies = []
    for store in state_store_dirs(fs, join(root, STATE_DIR)):
        names = set(list_names(fs, store))
        for kind in ("delta", "snapshot"):
            if f"{current}.{kind}" in names:
                copies.append((join(store, f"{current}.{kind}"), join(store, f"{target_version}.{kind}")))
                break
        else:
            raise CheckpointFormatError(
                f"{store}: state version {current} (written by batch {position.batch_id}) is missing, so the "
                "state cannot move to the appended batch; restore from a savepoint or drop the state"
            )
    return copies


def state_store_dirs(fs: fsspec.AbstractFileSystem, state_root: str) -> list[str]:
    """Every directory under ``state/`` that holds HDFS state store version files."""
    found = []
    pending = [state_root]
    while pending:
        directory = pending.pop()
        names = list_names(fs, directory)
        if any(state_file_version(name) for name in names):
            found.append(directory)
        pending.extend(
            join(directory, name)
            for name in names
            if not name.startswith(("_", "."))
            and state_file_version(name) is None
            and is_dir(fs, join(directory, name))
        )
    return sorted(found)


def _sink_entry_path(sink_path: str | None, batch: int, interval: int, storage_options: dict | None) -> str | None:
    if sink_path is None:
        return None
    if interval < 1:
        raise InvalidInputError(f"sink_compact_interval must be >= 1, got {interval}")
    fs, root = open_fs(sink_path, storage_options)
    if not is_dir(fs, join(root, "_spark_metadata")):
        raise InvalidInputError(
            f"{sink_path}: no _spark_metadata directory, so it is not a file sink's output path; "
            "pass the path the query writes to, or no sink path"
        )
    suffix = ".compact" if is_compaction_batch(batch, interval) else ""
    return join(sink_path.rstrip("/"), "_spark_metadata", f"{batch}{suffix}")


def _sink_root(entry: str | None) -> str | None:
    return entry.rsplit("/_spark_metadata/", 1)[0] if entry else None


def _write_sink_entry(sink_path: str | None, batch: int, interval: int, storage_options: dict | None) -> None:
    """The file sink's log entry for the appended batch: ``v1`` (no files), or the compacted log."""
    fs, root = open_fs(sink_path, storage_options)  # type: ignore[arg-type]
    log_dir = join(root, "_spark_metadata")
    if not is_compaction_batch(batch, interval):
        target = join(log_dir, str(batch))
        if not exists_file(fs, target):
            atomic_write(fs, target, b"v1")
        return
    target = join(log_dir, f"{batch}.compact")
    if exists_file(fs, target):
        return
    parts = []
    previous_compact = batch - interval
    if previous_compact >= 0:
        parts.append(read_bytes(fs, join(log_dir, f"{previous_compact}.compact")))
    for delta in range(previous_compact + 1, batch):
        parts.append(read_bytes(fs, join(log_dir, str(delta))))
    atomic_write(fs, target, compact_sink_entries(parts).encode("utf-8"))
