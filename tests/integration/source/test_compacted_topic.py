"""A compacted topic on the real broker: offsets with no record inside every batch.

Log compaction keeps the newest record of each key and removes older ones, leaving gaps in the offsets that no
consumer ever sees. A source that plans batches by offsets must read each record still present exactly once,
treat the gaps as neither data loss nor a reason to wait, and end with its checkpoint at the high watermark.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition
from tests.integration.source.test_source_reading import stream
from tests.kafka_utils import produce, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2
KEYS = 5
ROUNDS = 8


def present(bootstrap: str, topic: str) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record the topic still holds, read with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("compacted"), "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        found, ended = [], set()
        deadline = time.monotonic() + 30
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                ended.add(message.partition())
                continue
            found.append((message.partition(), message.offset(), message.value()))
        return sorted(found)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def compacted(kafka_bootstrap):
    """A topic whose cleaner removed the older records of each key: the records left, and the high watermarks."""
    topic = unique("compacted")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    config = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
              "delete.retention.ms": "100", "min.compaction.lag.ms": "0"}
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=config)]).values():
        future.result(30)
    produced = 0
    for round_ in range(ROUNDS):
        for p in range(PARTITIONS):
            # Each round skips a third of the keys, so the newest record of a key may lie in an older round than
            # another key's: the cleaner leaves records scattered among the gaps, not one unbroken tail.
            keys = [k for k in range(KEYS) if (k + round_) % 3 != 0]
            produce(kafka_bootstrap, topic, [(f"k{k}", f"v{round_}-{k}") for k in keys], partition=p)
            produced += len(keys)
        time.sleep(0.15)  # each round in a segment of its own (segment.ms): only closed segments are cleaned
    deadline = time.monotonic() + 60
    while not interior_gap(records := present(kafka_bootstrap, topic)):
        assert time.monotonic() < deadline, "the log cleaner did not compact the topic within 60 s"
        time.sleep(0.5)
        produce(kafka_bootstrap, topic, [(b"roll", b"x")], partition=0)  # rolls the active segment
        produced += 1
    highs = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
    records = present(kafka_bootstrap, topic)
    assert len(records) < produced and interior_gap(records)
    return topic, records, highs


def interior_gap(records: list[tuple[int, int, bytes]]) -> bool:
    """Whether some partition lacks an offset between two records it still holds."""
    return any(b - a > 1 for (pa, a, _), (pb, b, _) in zip(records, records[1:], strict=False) if pa == pb)


@pytest.mark.parametrize("read", [{"readMode": "executors"}, {"readMode": "driver"},
                                  {"kafkaConsumer.nativeReader": "false"}], ids=["executors", "driver", "python"])
def test_every_record_still_present_is_read_once_and_the_checkpoint_ends_at_the_watermark(spark, kafka_bootstrap,
                                                                                          compacted, tmp_path, read):
    topic, records, highs = compacted
    rows: list[tuple[int, int, bytes]] = []
    df = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="7",
                **{"kafkaConsumer.pollTimeoutMs": "20000", **read})
    checkpoint = str(tmp_path / "ckpt")
    query = (df.writeStream.foreachBatch(lambda batch, _id: rows.extend(
        (r.partition, r.offset, bytes(r.value)) for r in batch.collect()))
        .trigger(availableNow=True).option("checkpointLocation", checkpoint).start())
    try:
        assert query.awaitTermination(120), "the query did not end: a batch waits for an offset compaction removed?"
    finally:
        if query.isActive:
            query.stop()
    assert query.exception() is None, query.exception()
    # The cleaner may go on removing records while the query reads (on a loaded machine it finished a partition
    # after the fixture's look): every record still there afterwards was read, none that was gone before, once.
    after = present(kafka_bootstrap, topic)
    assert len(rows) == len(set(rows)), "a record read twice"
    assert set(after) <= set(rows) <= set(records), "every record present, exactly once"
    assert interior_gap(sorted(rows)), "the batches met the gaps compaction left"
    position = read_position(checkpoint).source_offsets(0)
    assert position == {TopicPartition(topic, p): high for p, high in highs.items()}
