"""The scratch checkpoint an upgrade rehearsal runs on: a live copy that makes Spark re-run the job's last batch.

A copy of committed batch N-1 with batch N's offsets and no commit for it (``copy_live_checkpoint`` with
``next_offsets``): Spark re-runs batch N from the copy on the state batch N started from, so the new code
meets real records and the real state even when no record arrived since. A job with one committed batch
is copied at that batch (the rehearsal then reads only records that arrive after it).

A source whose options cannot change between the starts of one DataFrame (Spark's own connector) is bounded
through the checkpoint instead: :func:`bound_pending_batch` makes the copy's pending batch end where the
rehearsal's stretch ends, and :func:`seed_checkpoint` makes an empty checkpoint whose first batch runs from
given offsets to given offsets (its planned ``offsets/0`` and, for each Kafka source, the initial offsets Spark's
connector reads from ``sources/<i>/0`` before it looks at ``startingOffsets``). Spark runs exactly that batch
under ``Trigger.Once``, whatever the DataFrame's options say.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace

from airflow_kafka_stream.checkpoint.atomic import atomic_write, join, open_fs
from airflow_kafka_stream.checkpoint.initial_offsets import write_initial_offsets
from airflow_kafka_stream.checkpoint.live_savepoint import copy_live_checkpoint
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.checkpoint_log import (
    METADATA,
    OFFSETS_DIR,
    OffsetLogEntry,
    render_offset_log,
)
from airflow_kafka_stream.core.kafka_sources import KafkaSources
from airflow_kafka_stream.core.offsets import PartitionOffsets
from airflow_kafka_stream.errors import JobStateError

#: The share of its time the rehearsal's copy works (``file_copy.Pace``). Higher than a live savepoint's: the copy
#: is on an upgrade's path, counted in its rehearsal's time limit, and made once per upgrade, not back to back.
REHEARSAL_COPY_SHARE = 0.5


@dataclass(frozen=True)
class RehearsalCopy:
    """The copy's location, the batch Spark re-runs there (None: none), and that batch's Kafka start and end.

    ``entry`` is the copy's newest offsets file (the re-run batch's, else the copied batch's) and
    ``committed_batch`` the batch the copy holds as committed."""

    url: str
    rerun_batch: int | None
    start: PartitionOffsets
    end: PartitionOffsets
    entry: OffsetLogEntry | None = None
    committed_batch: int = 0


def copy_for_rehearsal(checkpoint_url: str, target_url: str, storage_options: dict | None = None) -> RehearsalCopy:
    """Copy the job's checkpoint into ``target_url`` (empty) for a rehearsal; the checkpoint is only read."""
    position = read_position(checkpoint_url, storage_options)
    if position.batch_id is None:
        raise JobStateError(f"{checkpoint_url}: no committed batch yet, nothing to rehearse on")
    if position.batch_id == 0:
        made = copy_live_checkpoint(checkpoint_url, target_url, storage_options, batch_id=0,
                                    share=REHEARSAL_COPY_SHARE)
        offsets = _kafka(made.offsets.source_lines)
        return RehearsalCopy(target_url, None, offsets, offsets, made.offsets, made.batch_id)
    made = copy_live_checkpoint(checkpoint_url, target_url, storage_options, batch_id=position.batch_id - 1,
                                next_offsets=True, share=REHEARSAL_COPY_SHARE)
    end = _kafka(made.next_offsets.source_lines) if made.next_offsets is not None else {}
    return RehearsalCopy(target_url, made.batch_id + 1, _kafka(made.offsets.source_lines), end,
                         made.next_offsets or made.offsets, made.batch_id)


def bound_pending_batch(copy: RehearsalCopy, end: PartitionOffsets, storage_options: dict | None = None) -> RehearsalCopy:
    """Make the copy's pending batch end at ``end`` on every Kafka partition: the re-run batch's offsets file
    rewritten (the copy holds no checksum of it), or a batch after the copied one planned; returns the copy as
    it now is. Spark runs that batch first when the copy starts."""
    entry = _entry(copy)
    fs, root = open_fs(copy.url, storage_options)
    batch = copy.rerun_batch if copy.rerun_batch is not None else copy.committed_batch + 1
    atomic_write(fs, join(root, OFFSETS_DIR, str(batch)), render_offset_log(_ending_at(entry, end)).encode("utf-8"))
    return replace(copy, rerun_batch=batch, end=dict(end))


def seed_checkpoint(url: str, copy: RehearsalCopy, start: PartitionOffsets, end: PartitionOffsets,
                    storage_options: dict | None = None) -> None:
    """An empty checkpoint at ``url`` whose first batch reads ``start`` to ``end`` without state (the copy's
    sources, their order and its settings; watermark 0), for a source that keeps its initial offsets in the
    checkpoint (Spark's connector)."""
    entry = _entry(copy)
    metadata = {**entry.metadata, "batchWatermarkMs": 0}
    first = replace(_ending_at(entry, end), metadata_line=json.dumps(metadata, separators=(",", ":")),
                    metadata=metadata)
    fs, root = open_fs(url, storage_options)
    fs.makedirs(join(root, OFFSETS_DIR), exist_ok=True)
    atomic_write(fs, join(root, METADATA), json.dumps({"id": str(uuid.uuid4())}).encode("utf-8"))  # a query of its own
    atomic_write(fs, join(root, OFFSETS_DIR, "0"), render_offset_log(first).encode("utf-8"))
    for index, offsets in _split(entry, start).items():
        write_initial_offsets(url, index, offsets, storage_options)


def _entry(copy: RehearsalCopy) -> OffsetLogEntry:
    if copy.entry is None:
        raise ValueError("a rehearsal copy made without its offsets entry cannot be bounded")
    return copy.entry


def _split(entry: OffsetLogEntry, offsets: PartitionOffsets) -> dict[int, PartitionOffsets]:
    """``offsets`` by the entry's Kafka source that reads each partition."""
    return {index: {tp: offsets.get(tp, own) for tp, own in line.items()}
            for index, line in entry.kafka_sources().by_index.items()}


def _ending_at(entry: OffsetLogEntry, end: PartitionOffsets) -> OffsetLogEntry:
    return entry.with_sources_offsets(_split(entry, end))


def _kafka(lines) -> PartitionOffsets:
    return KafkaSources.of_lines(lines, "the rehearsal's copy").union()
