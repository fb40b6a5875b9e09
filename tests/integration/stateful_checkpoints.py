"""Checkpoints that real Spark wrote under each state store layout, built once in a Spark of their own.

The state store's maintenance task (which writes HDFS ``.snapshot`` and RocksDB
changelog-mode ``.zip`` files and purges old ones) starts once per JVM with the
first query's interval, 60 s by default; the shared test session cannot be made
to snapshot on time. So ``python -m tests.integration.stateful_checkpoints DIR``
builds them in a fresh JVM with maintenance every second, a snapshot every two
versions and two batches retained, and the tests restart them with
:func:`start_query` in the shared session.

Each kind reads JSON files from ``DIR/input`` one file per batch (a file source:
the state, not the source, is under test) and ends at committed batch
:data:`LAST_BATCH`, so the next batch loads state version ``LAST_BATCH + 1``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
#: kind -> SQL settings the query runs with (the provider is then recorded in the checkpoint).
KINDS: dict[str, dict[str, str]] = {
    "hdfs": {"spark.sql.streaming.stateStore.providerClass": HDFS},  # dedup then count: two operators
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass": ROCKSDB, CHANGELOG: "false"},
    "changelog": {"spark.sql.streaming.stateStore.providerClass": ROCKSDB, CHANGELOG: "true"},
    "stateless": {},
}
FILES = 9
LAST_BATCH = FILES - 1
#: The kinds whose files need the state store's maintenance (the stateless one is built in the shared session).
STATEFUL = ("hdfs", "rocksdb", "changelog")
BUILD_CONF = {
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.minBatchesToRetain": "2",
    "spark.sql.shuffle.partitions": "2",
}


def add_input(input_dir: Path, name: str, rows: int = 3) -> None:
    """One more input file (one batch): keys 0..2, values unique per file."""
    input_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"k": i % 3, "v": f"{name}-{i}"}) + "\n" for i in range(rows))
    tmp = input_dir / f".{name}.tmp"
    tmp.write_text(text)
    tmp.rename(input_dir / f"{name}.json")


def start_query(spark, kind: str, input_dir: Path, checkpoint: Path, files_per_batch: int = 1):
    """Start the kind's query (availableNow) on ``checkpoint``; the caller awaits it.

    The kind's settings are set only while the query starts (it copies them), so they do not leak into a
    shared session.
    """
    previous = {key: spark.conf.get(key, None) for key in KINDS[kind]}
    for key, value in KINDS[kind].items():
        spark.conf.set(key, value)
    try:
        frame = spark.readStream.schema("k INT, v STRING").option("maxFilesPerTrigger", files_per_batch).json(
            str(input_dir))
        if kind == "stateless":
            out = frame.selectExpr("k", "upper(v) AS v").writeStream.outputMode("append")
        elif kind == "hdfs":
            out = frame.dropDuplicates(["v"]).groupBy("k").count().writeStream.outputMode("complete")
        else:
            out = frame.groupBy("k").count().writeStream.outputMode("complete")
        return out.format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def build(root: Path, kinds: tuple[str, ...] = STATEFUL, spark=None) -> None:
    """Write each kind's checkpoint: :data:`FILES` batches, the queries running side by side."""
    own = spark is None
    if own:
        from airflow_kafka_stream.runtime.session import local_session

        spark = local_session("stateful-checkpoints", cores="2", extra=BUILD_CONF)
    try:
        queries = []
        for kind in kinds:
            for batch in range(FILES):
                add_input(root / kind / "input", f"a{batch}")
            # A query copies the session's settings when it starts, so the next kind's settings do not leak in.
            queries.append(start_query(spark, kind, root / kind / "input", root / kind / "checkpoint"))
        for query in queries:
            query.awaitTermination()
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
        if own:
            time.sleep(3)  # let maintenance upload the last snapshots and purge old files
    finally:
        if own:
            spark.stop()


if __name__ == "__main__":
    build(Path(sys.argv[1]))
