"""Spark's own Kafka connector (``format("kafka")``, pinned by jvm/spark-kafka/pom.xml) on the checkpoints this project
reads and writes.

docs/source.md promises that a query can move between ``format("kafka_stream")`` and ``format("kafka")`` on one
checkpoint and that the checkpoint tools work on both. Here, against the real broker and record by record: a query
of one source reads a topic; the checkpoint reader finds its position; a reset (an appended batch, what
``reset`` writes) moves it back; the other source resumes exactly there; then the first one again reads exactly
what arrived since. Both offset-log versions Spark 4.2 writes (``spark.sql.streaming.offsetLog.formatVersion``
1 and 2), with one source and with two (one of each format): every file the tools write keeps the version and
the line order it found.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_kafka_stream.checkpoint.fsck import fsck
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.savepoints import create_savepoint, restore_savepoint
from airflow_kafka_stream.checkpoint.writer import append_batch
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.runtime.session import spark_kafka_jars
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def kafka_frame(spark, source: str, bootstrap: str, topic: str):
    return (spark.readStream.format(source).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").load())


def read_once(spark, source: str, bootstrap: str, topic: str, checkpoint: str, *, second: tuple[str, str] | None = None,
              log_version: int = 1) -> list[tuple]:
    """One availableNow run of ``source`` (unioned with ``second``'s (format, topic) when given) on ``checkpoint``:
    (topic, partition, offset, value) of every record read; a fresh checkpoint gets offset log ``log_version``."""
    got: list = []
    frame = kafka_frame(spark, source, bootstrap, topic)
    if second:
        frame = frame.unionByName(kafka_frame(spark, second[0], bootstrap, second[1]))
    spark.conf.set(OFFSET_LOG_VERSION, str(log_version))
    try:
        query = (frame.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").writeStream
                 .option("checkpointLocation", checkpoint)
                 .foreachBatch(lambda df, _batch: got.extend(tuple(row) for row in df.collect()))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    finally:
        spark.conf.unset(OFFSET_LOG_VERSION)
    return sorted(got)


OFFSET_LOG_VERSION = "spark.sql.streaming.offsetLog.formatVersion"


def offset_log_versions(checkpoint: str) -> set[str]:
    """The version line of every offsets file of the checkpoint."""
    return {path.read_text().split("\n", 1)[0] for path in (Path(checkpoint) / "offsets").glob("[0-9]*")}


def produce_range(bootstrap: str, topic: str, start: int, end: int) -> None:
    for partition in (0, 1):
        produce(bootstrap, topic, [(None, f"p{partition}-{i}") for i in range(start, end)], partition=partition)


def records(topic: str, ranges: dict[int, range]) -> list[tuple]:
    return [(topic, p, i, f"p{p}-{i}") for p, offsets in ranges.items() for i in offsets]


def test_the_connector_is_installed_and_on_the_local_session_class_path(spark):
    jars = spark_kafka_jars()
    assert any("spark-sql-kafka-0-10" in jar for jar in jars), f"run scripts/setup-jvm: {jars}"
    assert all(jar in spark.conf.get("spark.jars") for jar in jars)


@pytest.mark.parametrize("log_version", [1, 2])
@pytest.mark.parametrize(("first", "then"), [("kafka", "kafka_stream"), ("kafka_stream", "kafka")])
def test_a_query_moves_between_the_sources_on_one_checkpoint_reset_in_between(spark, kafka_bootstrap, tmp_path,
                                                                                 first, then, log_version):
    topic = create_topic(kafka_bootstrap, unique("connector"), partitions=2)
    produce_range(kafka_bootstrap, topic, 0, 10)
    checkpoint = str(tmp_path / "checkpoint")

    assert read_once(spark, first, kafka_bootstrap, topic, checkpoint, log_version=log_version) == records(
        topic, {0: range(10), 1: range(10)})
    assert read_position(checkpoint).source_offsets(0) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}

    append_batch(checkpoint, {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 4})
    assert offset_log_versions(checkpoint) == {f"v{log_version}"}, "the reset kept the log's version"
    assert fsck(checkpoint).ok, fsck(checkpoint).to_dict()
    assert read_once(spark, then, kafka_bootstrap, topic, checkpoint) == records(topic, {0: range(7, 10),
                                                                                        1: range(4, 10)})

    produce_range(kafka_bootstrap, topic, 10, 13)
    assert read_once(spark, first, kafka_bootstrap, topic, checkpoint) == records(topic, {0: range(10, 13),
                                                                                         1: range(10, 13)})
    assert read_position(checkpoint).source_offsets(0) == {TopicPartition(topic, 0): 13, TopicPartition(topic, 1): 13}
    assert offset_log_versions(checkpoint) == {f"v{log_version}"}


@pytest.mark.parametrize("log_version", [1, 2])
def test_two_sources_one_of_each_format_reset_together_resume_exactly(spark, kafka_bootstrap, tmp_path, log_version):
    topics = [create_topic(kafka_bootstrap, unique(f"connector-{n}"), partitions=2) for n in ("a", "b")]
    for topic in topics:
        produce_range(kafka_bootstrap, topic, 0, 6)
    checkpoint = str(tmp_path / "checkpoint")
    both = {"second": ("kafka_stream", topics[1])}

    got = read_once(spark, "kafka", kafka_bootstrap, topics[0], checkpoint, log_version=log_version, **both)
    assert got == sorted(records(topics[0], {0: range(6), 1: range(6)}) + records(topics[1], {0: range(6), 1: range(6)}))
    position = read_position(checkpoint)
    assert [position.source_offsets(i) for i in (0, 1)] == [
        {TopicPartition(t, 0): 6, TopicPartition(t, 1): 6} for t in topics]

    append_batch(checkpoint, sources={0: {TopicPartition(topics[0], 0): 2, TopicPartition(topics[0], 1): 6},
                                      1: {TopicPartition(topics[1], 0): 6, TopicPartition(topics[1], 1): 3}})
    assert offset_log_versions(checkpoint) == {f"v{log_version}"}
    assert fsck(checkpoint).ok, fsck(checkpoint).to_dict()
    got = read_once(spark, "kafka", kafka_bootstrap, topics[0], checkpoint, **both)
    assert got == sorted(records(topics[0], {0: range(2, 6)}) + records(topics[1], {1: range(3, 6)}))

    # A savepoint of it, restored elsewhere: the copy keeps the version, and the query resumes there exactly.
    for topic in topics:
        produce_range(kafka_bootstrap, topic, 6, 8)
    manifest = create_savepoint(checkpoint, str(tmp_path / "savepoints" / "sp"), "1", datetime.now(UTC))
    assert [manifest.source_offsets(i) for i in (0, 1)] == [{TopicPartition(t, p): 6 for p in (0, 1)} for t in topics]
    restored = str(tmp_path / "restored")
    restore_savepoint(str(tmp_path / "savepoints" / "sp"), restored)
    assert offset_log_versions(restored) == {f"v{log_version}"}
    got = read_once(spark, "kafka", kafka_bootstrap, topics[0], restored, **both)
    assert got == sorted(records(topics[0], {0: range(6, 8), 1: range(6, 8)}) +
                         records(topics[1], {0: range(6, 8), 1: range(6, 8)}))
