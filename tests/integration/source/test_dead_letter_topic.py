"""Dead letters produced to a Kafka topic: each bad record once per batch run, keyed by where it came
from, with the error in headers, and the good records left alone."""

from __future__ import annotations

import datetime as dt

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from airflow_kafka_stream.runtime.dead_letter import (
    DeadLetterSink,
    KafkaDeadLetters,
    parse_json_values,
    split_dead_letters,
)
from tests.kafka_utils import create_topic, unique

pytestmark = pytest.mark.integration

EVENT = StructType([StructField("id", StringType()), StructField("amount", DoubleType())])


def kafka_rows(spark, values: list[bytes | None]):
    """A DataFrame with the source's columns, as records of partition 2 of topic 'orders'."""
    now = dt.datetime(2024, 1, 1, 12, 0, 0)
    rows = [(b"k%d" % i, v, "orders", 2, 100 + i, now, 0) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                       "timestamp timestamp, timestampType int")


def read_topic(bootstrap: str, topic: str) -> list:
    """Every record of the (one-partition) topic: the writer has flushed, so the end of partition is the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("dlq-reader"), "enable.partition.eof": True})
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    messages: list = []
    try:
        for _ in range(60):
            batch = consumer.consume(100, 0.5)
            messages += [m for m in batch if m.error() is None]
            if any(m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF for m in batch):
                return messages
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition on {topic} within 30s")


def test_bad_records_land_in_the_topic_with_their_origin_and_error(spark, kafka_bootstrap):
    dlq = create_topic(kafka_bootstrap, unique("dlq"), 1)
    df = parse_json_values(kafka_rows(spark, [b'{"id": "a", "amount": 1.5}', b"not json", None,
                                              b'{"amount": 2}', b'{"id": "e", "amount": 3}']),
                           EVENT, required=["id"])
    good, bad = split_dead_letters(df)
    assert sorted(r.parsed.id for r in good.collect()) == ["a", "e"]

    sink = DeadLetterSink.from_url(f"kafka://{dlq}", {"bootstrap.servers": kafka_bootstrap})
    assert isinstance(sink, KafkaDeadLetters)
    assert sink.write(bad, batch_id=7) == 3

    messages = read_topic(kafka_bootstrap, dlq)
    by_key = {m.key().decode(): m for m in messages}
    assert sorted(by_key) == ["orders:2:101", "orders:2:102", "orders:2:103"]
    assert by_key["orders:2:101"].value() == b"not json"
    assert by_key["orders:2:102"].value() is None
    headers = {k: v.decode() for k, v in by_key["orders:2:103"].headers()}
    assert headers["dlq.topic"] == "orders" and headers["dlq.partition"] == "2" and headers["dlq.offset"] == "103"
    assert headers["dlq.error"] == "required field 'id' is missing" and headers["dlq.batch"] == "7"
    assert dict((k, v.decode()) for k, v in by_key["orders:2:102"].headers())["dlq.error"] == "value is null"

    # A re-run batch produces its dead letters again, under the same keys (at-least-once, dedupe on key).
    assert sink.write(bad, batch_id=7) == 3
    again = read_topic(kafka_bootstrap, dlq)
    assert len(again) == 6 and {m.key().decode() for m in again} == set(by_key)


def test_batch_without_bad_records_produces_nothing(spark, kafka_bootstrap):
    dlq = create_topic(kafka_bootstrap, unique("dlq-empty"), 1)
    _good, bad = split_dead_letters(parse_json_values(kafka_rows(spark, [b'{"id": "a"}']), EVENT, required=["id"]))
    assert KafkaDeadLetters(dlq, {"bootstrap.servers": kafka_bootstrap}).write(bad, batch_id=0) == 0
    assert read_topic(kafka_bootstrap, dlq) == []


@pytest.mark.parametrize("url", ["kafka://", "kafka:///"])
def test_topic_destination_needs_a_topic_name(url, kafka_bootstrap):
    from airflow_kafka_stream.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"needs a topic name \(kafka://my-dlq\)"):
        DeadLetterSink.from_url(url, {"bootstrap.servers": kafka_bootstrap})
