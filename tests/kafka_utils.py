"""Helpers for tests that talk to a real Kafka-protocol broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def unique(prefix: str) -> str:
    """A fresh name, so tests sharing one broker never collide."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    """Create a topic (with topic-level ``config``, such as ``retention.ms``) and wait until its partitions show."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=dict(config or {}))])
    for fut in futures.values():
        fut.result(30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=5)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return name
        time.sleep(0.1)
    raise AssertionError(f"topic {name} did not appear")


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | str | None, bytes | str | None]],
    partition: int | None = None,
    headers: list[tuple[str, bytes]] | None = None,
) -> int:
    """Produce (key, value) records and wait until every one is acknowledged by all in-sync replicas."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    count = 0
    errors: list = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for key, value in records:
        kwargs = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, errors
    return count


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """(low, high) per partition; high is the high watermark, not the last stable offset (librdkafka's consumer
    reads at read_committed by default, where it would be the first offset of an open transaction)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm"), "enable.auto.commit": False,
                         "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets per partition (-1001 where none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def delete_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for future in admin.delete_topics([name]).values():
        future.result(30)


def recreate_topic(bootstrap: str, name: str, values: list[str]) -> None:
    """Delete the one-partition topic ``name`` and create it again holding ``values``: its offsets start over."""
    delete_topic(bootstrap, name)
    create_topic(bootstrap, name, 1)
    produce(bootstrap, name, [(None, value) for value in values], partition=0)
