"""Group control against a real broker: state, alter, standalone commit, refusal while in use."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import InvalidInputError, JobStateError, KafkaAccessError
from airflow_kafka_stream.kafka.groups import alter_group_offsets, commit_offsets, group_state
from tests.kafka_utils import committed, create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(kafka_bootstrap):
    name = create_topic(kafka_bootstrap, unique("groups"), partitions=2)
    produce(kafka_bootstrap, name, [(None, b"x")] * 5, partition=0)
    produce(kafka_bootstrap, name, [(None, b"y")] * 3, partition=1)
    return name


@pytest.fixture
def active_group(kafka_bootstrap, topic):
    """A consumer subscribed to the topic and polling, i.e. a member of the group."""
    group = unique("active")
    consumer = Consumer({
        "bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "max.poll.interval.ms": 7000,
    })
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the consumer never joined the group"
    try:
        yield group
    finally:
        consumer.close()


def test_alter_sets_offsets_of_an_empty_group(kafka_bootstrap, topic):
    config = {"bootstrap.servers": kafka_bootstrap}
    group = unique("g")
    alter_group_offsets(config, group, {TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 0})
    assert committed(kafka_bootstrap, group, topic, 2) == {0: 4, 1: 0}
    assert group_state(config, group) in ("Empty", "Dead")


def test_standalone_commit_does_not_join(kafka_bootstrap, topic):
    config = {"bootstrap.servers": kafka_bootstrap}
    group = unique("g")
    commit_offsets(config, group, {TopicPartition(topic, 1): 2})
    assert committed(kafka_bootstrap, group, topic, 2)[1] == 2
    assert group_state(config, group) in ("Empty", "Dead")


def test_active_group_refuses_alter_with_a_clear_message(kafka_bootstrap, topic, active_group):
    config = {"bootstrap.servers": kafka_bootstrap}
    assert group_state(config, active_group) == "Stable"
    with pytest.raises(JobStateError) as info:
        alter_group_offsets(config, active_group, {TopicPartition(topic, 0): 1, TopicPartition(topic, 1): 1})
    message = str(info.value)
    assert "in use by a running consumer" in message
    assert f"not changed: {topic}:0 (UNKNOWN_MEMBER_ID), {topic}:1 (UNKNOWN_MEMBER_ID)" in message
    assert "changed: none" in message
    assert "stop the job or consumer" in message
    with pytest.raises(JobStateError, match="in use by a running consumer"):
        commit_offsets(config, active_group, {TopicPartition(topic, 0): 1})


@pytest.mark.parametrize(
    ("offsets", "error", "message"),
    [
        pytest.param({}, InvalidInputError, "no offsets given", id="empty"),
        pytest.param({("T", 0): -1}, InvalidInputError, "offset -1 for T:0 is invalid", id="negative"),
        pytest.param({("T", 9): 1}, InvalidInputError, "partition(s) T:9 (topic has 2 partitions)", id="no-partition"),
    ],
)
def test_bad_offsets_are_refused_before_any_change(kafka_bootstrap, topic, offsets, error, message):
    group = unique("g")
    offsets = {TopicPartition(topic if t == "T" else t, p): o for (t, p), o in offsets.items()}
    with pytest.raises(error) as info:
        alter_group_offsets({"bootstrap.servers": kafka_bootstrap}, group, offsets)
    assert message.replace("T:", f"{topic}:") in str(info.value)
    assert committed(kafka_bootstrap, group, topic, 2) == {0: -1001, 1: -1001}


def test_unreachable_cluster_is_a_kafka_access_error():
    config = {"bootstrap.servers": "127.0.0.1:1", "socket.connection.setup.timeout.ms": 1000}
    with pytest.raises(KafkaAccessError, match="127.0.0.1:1"):
        group_state(config, "g", timeout=2)
