"""The driver's kept consumers (driver_consumers.py) against a real broker: a range that starts where the
last one ended is served by the same consumer from what it prefetched, any other start moves it, and
what a kept consumer reads is always exactly the range asked for."""

from __future__ import annotations

import time

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.source.driver_consumers import MAX_KEPT, DriverConsumers
from airflow_kafka_stream.source.native_reader import NativePartition
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.source_options import parse_source_options
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(kafka_bootstrap) -> str:
    name = create_topic(kafka_bootstrap, unique("kept"), 2)
    for partition in (0, 1):
        produce(kafka_bootstrap, name, [(None, f"p{partition}-{i}") for i in range(60)], partition=partition)
    return name


def offsets(batches) -> list[int]:
    return [o for batch in batches for o in batch.column("offset").to_pylist()]


def consumers(bootstrap: str, topic: str, **options: str) -> DriverConsumers:
    return DriverConsumers(parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                                 **options}))


def test_the_next_range_reads_on_from_the_kept_consumer(kafka_bootstrap, topic):
    kept = consumers(kafka_bootstrap, topic)
    try:
        assert offsets(kept.read(OffsetRange(topic, 0, 0, 20), lambda _b: True)) == list(range(20))
        first = kept._kept[TopicPartition(topic, 0)]
        assert first.next_offset == 20
        # Its last fetch answer holds the partition's watermarks: planning needs no request of its own.
        assert kept.cached_watermarks([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): (0, 60)}
        assert kept.cached_watermarks([TopicPartition(topic, 0), TopicPartition(topic, 1)]) is None, "1 has none"
        assert offsets(kept.read(OffsetRange(topic, 0, 20, 45), lambda _b: True)) == list(range(20, 45))
        assert kept._kept[TopicPartition(topic, 0)].polls is first.polls, "the same consumer read on"
        # A start elsewhere (a replayed or reset range): the consumer is moved, never read on from its queue.
        assert offsets(kept.read(OffsetRange(topic, 0, 5, 12), lambda _b: True)) == list(range(5, 12))
        assert offsets(kept.read(OffsetRange(topic, 0, 50, 60), lambda _b: True)) == list(range(50, 60))
        assert offsets(kept.read(OffsetRange(topic, 1, 0, 60), lambda _b: True)) == list(range(60))
        kept.forget([TopicPartition(topic, 1)])
        assert list(kept._kept) == [TopicPartition(topic, 0)]
        kept.keep_only([])
        assert not kept._kept
    finally:
        kept.close()


def test_a_trickling_partition_is_read_on_without_asking_the_broker(kafka_bootstrap, topic, monkeypatch):
    """A kept consumer at the log's end of a topic written a few records at a time queues an end-of-partition
    event with every fetch that found nothing new. They are old news once the read has passed them: none may
    cost a watermark request, which waits behind the consumer's own long-polling fetch (about 100 ms each,
    measured: a 50-record batch took 170-520 ms instead of 2)."""
    asked: list[int] = []
    real = NativePartition.watermarks
    monkeypatch.setattr(NativePartition, "watermarks", lambda self, timeout: asked.append(1) or real(self, timeout))
    kept = consumers(kafka_bootstrap, topic)
    try:
        assert offsets(kept.read(OffsetRange(topic, 0, 0, 60), lambda _b: True)) == list(range(60))
        position = 60
        for _ in range(4):
            for i in range(3):  # one record per request, the kept consumer's fetches finding the end between
                produce(kafka_bootstrap, topic, [(None, f"late-{position + i}")], partition=0)
                time.sleep(0.25)
            read = offsets(kept.read(OffsetRange(topic, 0, position, position + 3), lambda _b: True))
            assert read == list(range(position, position + 3))
            position += 3
        assert asked == [], f"{len(asked)} watermark requests for end-of-partition events the read had passed"
    finally:
        kept.close()


def test_a_refused_batch_keeps_nothing_and_a_pattern_query_keeps_no_consumer(kafka_bootstrap, topic):
    kept = consumers(kafka_bootstrap, topic)
    try:
        assert kept.read(OffsetRange(topic, 0, 0, 60), lambda _b: False) == []
        assert not kept._kept, "a read stopped by the byte budget closes its consumer"
    finally:
        kept.close()
    pattern = DriverConsumers(parse_source_options({"kafka.bootstrap.servers": kafka_bootstrap,
                                                    "subscribePattern": f"{topic}.*"}))
    try:
        assert offsets(pattern.read(OffsetRange(topic, 1, 10, 30), lambda _b: True)) == list(range(10, 30))
        assert not pattern._kept, "topics of a pattern come and go: nothing is kept"
    finally:
        pattern.close()


def test_at_most_max_kept_consumers_live(kafka_bootstrap, topic, monkeypatch):
    monkeypatch.setattr("airflow_kafka_stream.source.driver_consumers.MAX_KEPT", 1)
    kept = consumers(kafka_bootstrap, topic)
    try:
        kept.read(OffsetRange(topic, 0, 0, 10), lambda _b: True)
        kept.read(OffsetRange(topic, 1, 0, 10), lambda _b: True)
        assert list(kept._kept) == [TopicPartition(topic, 1)], "the least recently used goes"
    finally:
        kept.close()
    assert MAX_KEPT == 64


def test_kept_consumers_share_one_driver_batch_of_prefetch(kafka_bootstrap, topic):
    """What all kept consumers may fetch ahead together is about one driver-read batch, whatever the number of
    partitions, with a floor per consumer; at the log's end they long-poll."""
    kept = consumers(kafka_bootstrap, topic, driverReadMaxRecords="20000", driverReadMaxBytes=str(64 * 1024 * 1024))
    assert kept.prefetch_settings(1) == {"queued.min.messages": 20_000, "queued.max.messages.kbytes": 65_536,
                                         "fetch.wait.max.ms": 100}
    assert kept.prefetch_settings(8) == {"queued.min.messages": 2_500, "queued.max.messages.kbytes": 8_192,
                                         "fetch.wait.max.ms": 100}
    assert kept.prefetch_settings(1000)["queued.min.messages"] == 1_000, "a floor, and at most MAX_KEPT share"
    assert kept.prefetch_settings(1000)["queued.max.messages.kbytes"] == 1_024
