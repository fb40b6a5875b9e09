"""The scratch checkpoint an upgrade rehearsal runs on: a live copy that makes Spark re-run the job's last batch.

A copy of committed batch N-1 with batch N's offsets and no commit for it (``copy_live_checkpoint`` with
``next_offsets``): Spark re-runs batch N from the copy on the state batch N started from, so the new code
meets real records and the real state even when no record arrived since. A job with one committed batch
is copied at that batch (the rehearsal then reads only records that arrive after it).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_kafka_stream.checkpoint.live_savepoint import copy_live_checkpoint
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.kafka_sources import KafkaSources
from airflow_kafka_stream.core.offsets import PartitionOffsets
from airflow_kafka_stream.errors import JobStateError

#: The share of its time the rehearsal's copy works (``file_copy.Pace``). Higher than a live savepoint's: the copy
#: is on an upgrade's path, counted in its rehearsal's time limit, and made once per upgrade, not back to back.
REHEARSAL_COPY_SHARE = 0.5


@dataclass(frozen=True)
class RehearsalCopy:
    """The copy's location, the batch Spark re-runs there (None: none), and that batch's Kafka start and end."""

    url: str
    rerun_batch: int | None
    start: PartitionOffsets
    end: PartitionOffsets


def copy_for_rehearsal(checkpoint_url: str, target_url: str, storage_options: dict | None = None) -> RehearsalCopy:
    """Copy the job's checkpoint into ``target_url`` (empty) for a rehearsal; the checkpoint is only read."""
    position = read_position(checkpoint_url, storage_options)
    if position.batch_id is None:
        raise JobStateError(f"{checkpoint_url}: no committed batch yet, nothing to rehearse on")
    if position.batch_id == 0:
        made = copy_live_checkpoint(checkpoint_url, target_url, storage_options, batch_id=0,
                                    share=REHEARSAL_COPY_SHARE)
        offsets = _kafka(made.offsets.source_lines)
        return RehearsalCopy(target_url, None, offsets, offsets)
    made = copy_live_checkpoint(checkpoint_url, target_url, storage_options, batch_id=position.batch_id - 1,
                                next_offsets=True, share=REHEARSAL_COPY_SHARE)
    end = _kafka(made.next_offsets.source_lines) if made.next_offsets is not None else {}
    return RehearsalCopy(target_url, made.batch_id + 1, _kafka(made.offsets.source_lines), end)


def _kafka(lines) -> PartitionOffsets:
    return KafkaSources.of_lines(lines, "the rehearsal's copy").union()
