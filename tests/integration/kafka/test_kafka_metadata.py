"""kafka/metadata.py against a real broker: topics, watermarks, offsets for times, group commits."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.devstack.broker import free_port
from airflow_kafka_stream.errors import InvalidInputError, KafkaAccessError
from airflow_kafka_stream.kafka import metadata
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def config(kafka_bootstrap):
    return {"bootstrap.servers": kafka_bootstrap}


@pytest.fixture
def topic(kafka_bootstrap):
    """A two-partition topic: partition 0 holds offsets 0..4, partition 1 is empty."""
    name = create_topic(kafka_bootstrap, unique("meta"), 2)
    produce(kafka_bootstrap, name, [(b"k", f"v{i}".encode()) for i in range(5)], partition=0)
    return name


def test_list_topic_partitions_by_name_and_pattern(config, kafka_bootstrap, topic):
    other = create_topic(kafka_bootstrap, topic + "-b", 3)
    assert metadata.list_topic_partitions(config, topics=[topic]) == {topic: 2}
    assert metadata.list_topic_partitions(config, pattern=topic + ".*") == {topic: 2, other: 3}
    # The pattern must match the whole name, as Kafka's pattern subscription does.
    assert metadata.list_topic_partitions(config, pattern=topic[:-2]) == {}
    everything = metadata.list_topic_partitions(config)
    assert everything[topic] == 2 and not any(name.startswith("__") for name in everything)


def test_unknown_topic_is_invalid_input_and_not_created(config):
    name = unique("missing")
    with pytest.raises(InvalidInputError, match=f"topic\\(s\\) {name} do not exist"):
        metadata.list_topic_partitions(config, topics=[name])
    # A broker with auto.create.topics.enable creates topics a metadata request names: asking must not create it.
    assert name not in metadata.list_topic_partitions(config)


def test_bad_pattern_is_invalid_input(config):
    with pytest.raises(InvalidInputError, match="not a valid regular expression"):
        metadata.list_topic_partitions(config, pattern="(")


def test_watermarks(config, topic):
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert metadata.watermarks(config, tps) == {tps[0]: (0, 5), tps[1]: (0, 0)}


def test_watermarks_of_missing_partition(config, topic):
    with pytest.raises(InvalidInputError, match=f"{topic}:7 \\(topic has 2 partitions\\)"):
        metadata.watermarks(config, [TopicPartition(topic, 0), TopicPartition(topic, 7)], timeout=5)


def test_offsets_for_timestamps(config, kafka_bootstrap):
    name = create_topic(kafka_bootstrap, unique("times"), 2)
    before = int(time.time() * 1000) - 1
    produce(kafka_bootstrap, name, [(None, b"old")] * 3, partition=0)
    time.sleep(0.02)
    middle = int(time.time() * 1000)
    time.sleep(0.02)
    produce(kafka_bootstrap, name, [(None, b"new")] * 2, partition=0)
    time.sleep(0.02)
    after = int(time.time() * 1000)
    p0, p1 = TopicPartition(name, 0), TopicPartition(name, 1)
    assert metadata.offsets_for_timestamps(config, {p0: 0, p1: 0}) == {p0: 0, p1: 0}
    assert metadata.offsets_for_timestamps(config, {p0: before}) == {p0: 0}
    assert metadata.offsets_for_timestamps(config, {p0: middle, p1: middle}) == {p0: 3, p1: 0}
    # After the last record Kafka answers -1: the end offset.
    assert metadata.offsets_for_timestamps(config, {p0: after}) == {p0: 5}


def test_offsets_for_timestamps_within_one_second(config, kafka_bootstrap):
    """Records a few ms apart: the answer must be the first record at or after the time, not the second's start."""
    name = create_topic(kafka_bootstrap, unique("subsec"), 1)
    tp = TopicPartition(name, 0)
    produce(kafka_bootstrap, name, [(None, b"a")])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce(kafka_bootstrap, name, [(None, b"b")])
    stamps = _timestamps(kafka_bootstrap, name, 2)
    expected = 1 if stamps[0] < cut <= stamps[1] else (0 if cut <= stamps[0] else 2)
    assert metadata.offsets_for_timestamps(config, {tp: cut}) == {tp: expected}


def _timestamps(bootstrap: str, topic: str, count: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ts"), "enable.auto.commit": False})
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, 0)])
        stamps: list[int] = []
        deadline = time.monotonic() + 10
        while len(stamps) < count and time.monotonic() < deadline:
            stamps += [m.timestamp()[1] for m in consumer.consume(count, 1.0) if m.error() is None]
        return stamps
    finally:
        consumer.close()


def test_offsets_for_timestamps_rejects_non_integer(config, topic):
    with pytest.raises(InvalidInputError, match="milliseconds since the epoch"):
        metadata.offsets_for_timestamps(config, {TopicPartition(topic, 0): "2024-01-01"})


def test_committed_offsets(config, kafka_bootstrap, topic):
    group = unique("group")
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[KafkaTopicPartition(topic, 0, 3)], asynchronous=False)
    consumer.close()
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert metadata.committed_offsets(config, group, [p0, p1]) == {p0: 3, p1: None}
    assert metadata.committed_offsets(config, unique("nogroup"), [p0]) == {p0: None}


def test_committed_offsets_of_unknown_topic(config):
    with pytest.raises(InvalidInputError, match="do not exist"):
        metadata.committed_offsets(config, "g", [TopicPartition(unique("missing"), 0)])


def test_unreachable_broker_is_access_error():
    config = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    with pytest.raises(KafkaAccessError, match=r"Kafka at 127\.0\.0\.1:\d+ could not list its topics.*reachable"):
        metadata.list_topic_partitions(config, timeout=1)
    with pytest.raises(KafkaAccessError, match="could not list watermarks"):
        metadata.watermarks(config, [TopicPartition("t", 0)], timeout=1)


def test_missing_bootstrap_is_invalid_input():
    with pytest.raises(InvalidInputError, match=r"bootstrap\.servers'\] must be provided"):
        metadata.list_topic_partitions({})
