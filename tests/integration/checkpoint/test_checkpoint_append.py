"""append_batch on real Spark checkpoints: Spark resumes at exactly the appended offsets.

Uses Spark's ``rate-micro-batch`` source (deterministic: 10 rows per batch, offset
``{"offset": rows, "timestamp": ms}``) so the appended source line is "the source at
index 0", plus the project's ``kafka_stream`` source against a real broker.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from pyspark.sql import functions as F

from airflow_kafka_stream.checkpoint.fsck import fsck
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.writer import APPEND_STEPS, append_batch, recover_incomplete_append
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.render.checkpoint import fsck_text
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def rate_line(rows: int) -> str:
    return json.dumps({"offset": rows, "timestamp": rows * 100}, separators=(",", ":"))


def run_count(spark, checkpoint: str) -> list[tuple[int, int, int, int]]:
    """One availableNow run of a stateful count; returns (batch, count, min, max) per batch."""
    got: list = []
    counts = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 10)
        .load()
        .groupBy(F.lit(1).alias("k"))
        .agg(F.count("*").alias("n"), F.min("value").alias("lo"), F.max("value").alias("hi"))
    )
    query = (
        counts.writeStream.outputMode("complete")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(lambda df, batch: got.extend((batch, *row[1:]) for row in df.collect()))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return got


def run_stateless(spark, checkpoint: str, sink: str | None = None) -> list[tuple[int, int, int]]:
    """One availableNow run copying rate rows; returns (batch, min, max) per batch (from foreachBatch or sink)."""
    got: list = []
    rows = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
    writer = rows.writeStream.option("checkpointLocation", checkpoint).trigger(availableNow=True)
    if sink:
        query = writer.format("parquet").option("path", sink).start()
    else:
        query = writer.foreachBatch(
            lambda df, batch: got.append((batch, *df.agg(F.min("value"), F.max("value")).first()))
        ).start()
    query.awaitTermination()
    return got


@pytest.fixture
def stateful_checkpoint(spark, tmp_path):
    """A stateful count that ran 3 batches (30 rows), committed position batch 2."""
    checkpoint = str(tmp_path / "stateful")
    for _ in range(3):
        run_count(spark, checkpoint)
    return checkpoint


def test_stateless_restart_reads_from_appended_offsets(spark, tmp_path):
    checkpoint = str(tmp_path / "ck")
    for _ in range(2):
        run_stateless(spark, checkpoint)
    result = append_batch(checkpoint, source_line=rate_line(500))
    assert result.batch_id == 2
    assert fsck(checkpoint).ok
    assert run_stateless(spark, checkpoint) == [(3, 500, 509)], "first batch after the append starts at 500"


def test_stateful_count_continues_after_append(spark, stateful_checkpoint):
    assert run_count(spark, stateful_checkpoint)[-1] == (3, 40, 0, 39)
    append_batch(stateful_checkpoint, source_line=rate_line(1000))
    assert run_count(spark, stateful_checkpoint) == [(5, 50, 0, 1009)], "state kept, reading resumed at 1000"
    assert run_count(spark, stateful_checkpoint) == [(6, 60, 0, 1019)]


@pytest.mark.parametrize(
    ("batches_before", "interval"),
    [
        pytest.param(2, 3, id="appended-batch-is-a-compaction-batch"),
        pytest.param(3, 3, id="appended-batch-is-a-plain-entry-then-compaction"),
    ],
)
def test_file_sink_survives_append_and_compaction(spark, tmp_path, batches_before, interval):
    checkpoint, sink = str(tmp_path / "ck"), str(tmp_path / "out")
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(interval))
    try:
        for _ in range(batches_before):
            run_stateless(spark, checkpoint, sink)
        appended = append_batch(
            checkpoint, source_line=rate_line(700), sink_metadata_path=sink, sink_compact_interval=interval
        )
        for _ in range(interval + 1):
            run_stateless(spark, checkpoint, sink)
    finally:
        spark.conf.unset("spark.sql.streaming.fileSink.log.compactInterval")
    assert appended.sink_entry.endswith(
        f"/{appended.batch_id}.compact" if batches_before == 2 else f"/{appended.batch_id}"
    )
    values = sorted(row.value for row in spark.read.parquet(sink).select("value").collect())
    expected = list(range(batches_before * 10)) + list(range(700, 700 + (interval + 1) * 10))
    assert values == expected, "every batch before and after the append is in the sink, nothing twice"


def test_refuses_in_flight_batch_and_changes_nothing(tmp_path, stateful_checkpoint):
    os.remove(os.path.join(stateful_checkpoint, "commits", "2"))
    before = sorted(os.listdir(os.path.join(stateful_checkpoint, "offsets")))
    with pytest.raises(JobStateError, match="batch 2 is in flight"):
        append_batch(stateful_checkpoint, source_line=rate_line(5))
    assert sorted(os.listdir(os.path.join(stateful_checkpoint, "offsets"))) == before


def test_refuses_rocksdb_state(spark, tmp_path):
    checkpoint = str(tmp_path / "rocks")
    spark.conf.set(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    try:
        run_count(spark, checkpoint)
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    with pytest.raises(JobStateError, match="RocksDBStateStoreProvider.*drop the state"):
        append_batch(checkpoint, source_line=rate_line(5))


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        pytest.param({}, "exactly one", id="nothing-given"),
        pytest.param({"new_offsets": {TopicPartition("t", 0): -1}}, ">= 0", id="special-offset"),
        pytest.param({"source_line": "1", "source_index": 3}, "source index 3", id="bad-index"),
    ],
)
def test_bad_input_changes_nothing(stateful_checkpoint, kwargs, needle):
    with pytest.raises((InvalidInputError, Exception), match=needle):
        append_batch(stateful_checkpoint, **kwargs)
    assert read_position(stateful_checkpoint).batch_id == 2


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", APPEND_STEPS[:-1])
def test_crash_at_each_step_recovers_to_old_or_new(spark, tmp_path, stateful_checkpoint, step):
    def crash_after(done: str) -> None:
        if done == step:
            raise Crash(done)

    with pytest.raises(Crash):
        append_batch(stateful_checkpoint, source_line=rate_line(1000), step_hook=crash_after)
    outcome = recover_incomplete_append(stateful_checkpoint)
    assert outcome == ("rolled back" if step in ("journal", "state") else "finished")
    report = fsck(stateful_checkpoint)
    assert report.ok, fsck_text(report)
    position = read_position(stateful_checkpoint)
    if outcome == "rolled back":
        assert (position.batch_id, position.in_flight_batch_id) == (2, None), "the old checkpoint"
        assert run_count(spark, stateful_checkpoint) == [(3, 40, 0, 39)]
    else:
        assert position.batch_id == 3 and position.offsets.source_value(0)["offset"] == 1000, "the new one"
        assert run_count(spark, stateful_checkpoint) == [(4, 40, 0, 1009)]


def test_next_append_finishes_an_interrupted_one(stateful_checkpoint):
    def crash(done: str) -> None:
        if done == "offsets":
            raise Crash(done)

    with pytest.raises(Crash):
        append_batch(stateful_checkpoint, source_line=rate_line(100), step_hook=crash)
    assert read_position(stateful_checkpoint).incomplete_append == 3
    assert not fsck(stateful_checkpoint).ok, "fsck reports the interrupted append"
    assert append_batch(stateful_checkpoint, source_line=rate_line(200)).batch_id == 4
    assert fsck(stateful_checkpoint).ok


def test_kafka_stream_source_restarts_at_appended_offsets(spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("append"), partitions=2)
    for partition in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"p{partition}-{i}") for i in range(10)], partition=partition)
    checkpoint = str(tmp_path / "kafka")

    def run() -> list[tuple[int, int]]:
        got: list = []
        frame = (
            spark.readStream.format("kafka_stream")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        query = (
            frame.writeStream.option("checkpointLocation", checkpoint)
            .foreachBatch(lambda df, _b: got.extend((r.partition, r.offset) for r in df.collect()))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sorted(got)

    assert len(run()) == 20
    assert read_position(checkpoint).source_offsets(0) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}
    append_batch(checkpoint, {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 4})
    assert run() == [(0, 7), (0, 8), (0, 9)] + [(1, offset) for offset in range(4, 10)]
    shutil.rmtree(tmp_path / "kafka")
