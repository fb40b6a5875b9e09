"""Withdraw a batch Spark planned but never ran, so a drained query's checkpoint ends at its last committed batch.

A source that cannot be asked to plan nothing (Spark's own Kafka connector) may have the next batch planned
(``offsets/N`` written) when a drain ends. The runtime holds such a batch before the job's batch function
runs (see ``runtime/supervision.py``): nothing of it was written to a sink or a state store. Its offsets file
is then removed and the checkpoint is exactly that of a query that stopped after batch N-1; the next start plans
batch N again from where N-1 ended (Spark would otherwise re-run it over the range it planned, which is also
correct, but leaves a batch "in flight" that a savepoint at the stop refuses).
"""

from __future__ import annotations

import logging

from airflow_kafka_stream.checkpoint.atomic import exists_file, join, open_fs
from airflow_kafka_stream.checkpoint.reader import read_started_position
from airflow_kafka_stream.core.checkpoint_log import OFFSETS_DIR

log = logging.getLogger(__name__)


def withdraw_planned_batch(url: str, batch_id: int, storage_options: dict | None = None) -> bool:
    """Remove ``offsets/<batch_id>`` (and its checksum) when it is the checkpoint's batch in flight; True when
    removed. The caller vouches that the batch never ran; a batch that is not in flight (committed, or not the
    newest) is left alone."""
    position = read_started_position(url, storage_options)
    if position is None or position.in_flight_batch_id != batch_id:
        return False
    fs, root = open_fs(url, storage_options)
    for name in (str(batch_id), f".{batch_id}.crc"):
        path = join(root, OFFSETS_DIR, name)
        if exists_file(fs, path):
            fs.rm(path)
    log.info("%s: batch %s was planned but never ran; withdrawn from the offset log", url, batch_id)
    return True
