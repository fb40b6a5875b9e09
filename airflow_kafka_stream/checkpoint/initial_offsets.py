"""Where Spark's own Kafka connector begins a query that never ran a batch: its initial offsets in the checkpoint.

The connector keeps them in ``sources/<i>/0`` (one file per Kafka source of the query), reads that file before its
``startingOffsets`` option and never writes over it. The runtime writes it to start a new generation of a standby's
query where the generation begins, and a rehearsal to bound a stateless run (``checkpoint/rehearsal_copy.py``).
"""

from __future__ import annotations

from airflow_kafka_stream.checkpoint.atomic import atomic_write, join, open_fs
from airflow_kafka_stream.core.checkpoint_log import SOURCES_DIR
from airflow_kafka_stream.core.offsets import PartitionOffsets, render_offsets_json

#: How Spark's Kafka connector writes a source's initial offsets (``KafkaSourceInitialOffsetWriter``): a zero byte
#: (kept since Spark 2.1.0 for compatibility, and expected by its reader), the version line, then the offsets JSON.
INITIAL_OFFSETS_HEADER = b"\x00v1\n"


def write_initial_offsets(url: str, source_index: int, offsets: PartitionOffsets,
                          storage_options: dict | None = None) -> None:
    """Where Spark's connector begins source ``source_index`` of a query that never ran a batch (its
    ``sources/<i>/0``): it reads this file before its ``startingOffsets`` option and never writes over it."""
    fs, root = open_fs(url, storage_options)
    folder = join(root, SOURCES_DIR, str(source_index))
    fs.makedirs(folder, exist_ok=True)
    atomic_write(fs, join(folder, "0"), INITIAL_OFFSETS_HEADER + render_offsets_json(offsets).encode("utf-8"))
