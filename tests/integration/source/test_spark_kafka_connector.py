"""Spark's own Kafka connector (``format("kafka")``, pinned by jvm/spark-kafka/pom.xml) on the checkpoints this project
reads and writes.

docs/source.md promises that a query can move between ``format("kafka_stream")`` and ``format("kafka")`` on one
checkpoint and that the checkpoint tools work on both. Here, against the real broker and record by record: a query
of one source reads a topic; the checkpoint reader finds its position; a reset (an appended batch, what
``reset`` writes) moves it back; the other source resumes exactly there; then the first one again reads exactly
what arrived since.
"""

from __future__ import annotations

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.writer import append_batch
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.runtime.session import spark_kafka_jars
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def read_once(spark, source: str, bootstrap: str, topic: str, checkpoint: str) -> list[tuple[int, int, str]]:
    """One availableNow run of ``source`` on ``checkpoint``: (partition, offset, value) of every record read."""
    got: list = []
    frame = (spark.readStream.format(source).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("startingOffsets", "earliest").load())
    query = (frame.selectExpr("partition", "offset", "CAST(value AS STRING) AS value").writeStream
             .option("checkpointLocation", checkpoint)
             .foreachBatch(lambda df, _batch: got.extend(tuple(row) for row in df.collect()))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return sorted(got)


def test_the_connector_is_installed_and_on_the_local_session_class_path(spark):
    jars = spark_kafka_jars()
    assert any("spark-sql-kafka-0-10" in jar for jar in jars), f"run scripts/setup-jvm: {jars}"
    assert all(jar in spark.conf.get("spark.jars") for jar in jars)


@pytest.mark.parametrize(("first", "then"), [("kafka", "kafka_stream"), ("kafka_stream", "kafka")])
def test_a_query_moves_between_the_sources_on_one_checkpoint_reset_in_between(spark, kafka_bootstrap, tmp_path,
                                                                                 first, then):
    topic = create_topic(kafka_bootstrap, unique("connector"), partitions=2)
    for partition in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"p{partition}-{i}") for i in range(10)], partition=partition)
    checkpoint = str(tmp_path / "checkpoint")

    assert read_once(spark, first, kafka_bootstrap, topic, checkpoint) == [
        (p, i, f"p{p}-{i}") for p in (0, 1) for i in range(10)]
    assert read_position(checkpoint).source_offsets(0) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}

    append_batch(checkpoint, {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 4})
    assert read_once(spark, then, kafka_bootstrap, topic, checkpoint) == (
        [(0, i, f"p0-{i}") for i in range(7, 10)] + [(1, i, f"p1-{i}") for i in range(4, 10)])

    for partition in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"p{partition}-{i}") for i in range(10, 13)], partition=partition)
    assert read_once(spark, first, kafka_bootstrap, topic, checkpoint) == [
        (p, i, f"p{p}-{i}") for p in (0, 1) for i in range(10, 13)]
    assert read_position(checkpoint).source_offsets(0) == {TopicPartition(topic, 0): 13, TopicPartition(topic, 1): 13}
