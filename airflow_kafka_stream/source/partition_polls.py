"""Polling one assigned Kafka partition into Arrow batches: what a poll returns, and the
confluent-kafka implementation (the C reader in native_reader.py gives the same polls).

The Python reader is the fallback when the C extension is not built and the only reader of
headers. Its per-record work is a few C-level maps over confluent-kafka messages; columns that
are constant or contiguous (topic, partition, offsets) are built without touching each record.
"""

from __future__ import annotations

from itertools import chain
from typing import NamedTuple, Protocol

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.source.offset_ranges import OffsetRange

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))


class Polled(NamedTuple):
    """One poll of a partition: records below the range's end, and what else came back."""

    batch: pa.RecordBatch | None
    first_offset: int
    last_offset: int
    #: Error events (end of partition, offset out of range, ...) with the offset they refer to.
    events: list[tuple[KafkaError, int]]
    #: A record at or past the range's end arrived: the range is complete.
    beyond_end: bool


class PartitionPolls(Protocol):
    """A consumer assigned to one partition at the range's start."""

    def poll(self, max_messages: int, timeout: float, end: int) -> Polled: ...

    def watermarks(self, timeout: float) -> tuple[int, int]: ...

    def cached_watermarks(self) -> tuple[int, int] | None:
        """(low, high) as the consumer's last fetch answer gave them, without asking the broker; None when
        there is none (the values may be librdkafka's -1001 before the first answer)."""

    def assign(self, start: int | None) -> None:
        """Read the same partition from ``start`` on, dropping what was fetched; None: stop fetching."""

    def close(self) -> None: ...


class ConfluentPartition:
    """Polls through confluent-kafka's Consumer, one Python object per message."""

    def __init__(self, consumer: Consumer, rng: OffsetRange, schema: pa.Schema) -> None:
        self._consumer = consumer
        self._rng = rng
        self._schema = schema
        consumer.assign([KafkaTopicPartition(rng.topic, rng.partition, rng.start)])

    def poll(self, max_messages: int, timeout: float, end: int) -> Polled:
        messages = self._consumer.consume(num_messages=max_messages, timeout=timeout)
        events: list[tuple[KafkaError, int]] = []
        if any(map(Message.error, messages)):
            events = [(m.error(), m.offset()) for m in messages if m.error() is not None]
            messages = [m for m in messages if m.error() is None]
        beyond = bool(messages) and messages[-1].offset() >= end
        if beyond:
            messages = [m for m in messages if m.offset() < end]
        if not messages:
            return Polled(None, -1, -1, events, beyond)
        batch = records_to_batch(messages, self._rng.topic, self._rng.partition, self._schema)
        return Polled(batch, messages[0].offset(), messages[-1].offset(), events, beyond)

    def watermarks(self, timeout: float) -> tuple[int, int]:
        return self._consumer.get_watermark_offsets(
            KafkaTopicPartition(self._rng.topic, self._rng.partition), timeout=timeout
        )

    def cached_watermarks(self) -> tuple[int, int] | None:
        try:
            return self._consumer.get_watermark_offsets(
                KafkaTopicPartition(self._rng.topic, self._rng.partition), cached=True)
        except KafkaException:
            return None

    def assign(self, start: int | None) -> None:
        if start is None:
            self._consumer.unassign()
        else:
            self._consumer.assign([KafkaTopicPartition(self._rng.topic, self._rng.partition, start)])

    def close(self) -> None:
        self._consumer.close()


def records_to_batch(messages: list, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """Turn consumed messages (no error events) of one partition into an Arrow batch."""
    count = len(messages)
    first, last = messages[0].offset(), messages[-1].offset()
    if last - first + 1 == count:
        offsets = pa.array(np.arange(first, last + 1, dtype=np.int64))
    else:  # compacted topic or transaction markers: offsets have gaps
        offsets = pa.array(list(map(Message.offset, messages)), pa.int64())
    # (type, millis) pairs flattened into one array: no per-record Python work beyond the tuple.
    stamps = np.fromiter(chain.from_iterable(map(Message.timestamp, messages)), dtype=np.int64, count=2 * count)
    columns = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.array(np.full(count, partition, dtype=np.int32)),
        offsets,
        # Spark's microseconds; librdkafka's types 0/1/2 (none/create/log append) are Spark's -1/0/1.
        pa.array(stamps[1::2] * 1000, pa.timestamp("us", tz="UTC")),
        pa.array((stamps[0::2] - 1).astype(np.int32)),
    ]
    if len(schema) == 8:
        columns.append(pa.array(list(map(Message.headers, messages)), HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
