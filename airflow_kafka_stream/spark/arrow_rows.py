"""Read one offset range from Kafka into Arrow record batches with Spark's Kafka columns.

This runs on executors and is the hot path: the per-record Python work is a few
list comprehensions over confluent-kafka messages; columns that are constant or
contiguous (topic, partition, offsets) are built without touching each record.
"""

from __future__ import annotations

import gc
import logging
import time
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.errors import DataLossError, InvalidInputError, KafkaAccessError
from airflow_kafka_stream.spark.offset_ranges import OffsetRange
from airflow_kafka_stream.spark.source_options import SourceOptions

log = logging.getLogger(__name__)

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))

#: Messages fetched per consume() call; also the largest Arrow batch handed to Spark.
CONSUME_BATCH = 20_000

#: Fetch settings that keep librdkafka's prefetch queue full; the user's kafka.* options win.
READ_DEFAULTS = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.min.messages": 500_000,
    "queued.max.messages.kbytes": 256 * 1024,
    "fetch.wait.max.ms": 100,
}


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for the source's columns (all nullable, timestamps in UTC)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def consumer_config(options: SourceOptions) -> dict[str, object]:
    """Settings of a read-only, assign-only consumer: it never joins a group or commits."""
    config: dict[str, object] = dict(READ_DEFAULTS)
    config.update(options.kafka)
    config.setdefault("group.id", f"spark-kafka-source-{uuid.uuid4().hex}")
    config.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # Out-of-range starts are data loss: fail, or (failOnDataLoss=false) go on at the earliest offset.
            "auto.offset.reset": "error" if options.fail_on_data_loss else "earliest",
        }
    )
    return config


def open_consumer(options: SourceOptions) -> Consumer:
    try:
        return Consumer(consumer_config(options))
    except KafkaException as exc:
        raise InvalidInputError(
            f"the Kafka client refused the kafka.* options: {exc}; fix or remove the option it names "
            "(names are librdkafka's, see its CONFIGURATION.md)"
        ) from exc


def records_to_batch(messages: list, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """Turn consumed messages (no error events) of one partition into an Arrow batch."""
    count = len(messages)
    first, last = messages[0].offset(), messages[-1].offset()
    if last - first + 1 == count:
        offsets = pa.array(np.arange(first, last + 1, dtype=np.int64))
    else:  # compacted topic or transaction markers: offsets have gaps
        offsets = pa.array(list(map(Message.offset, messages)), pa.int64())
    stamps = list(map(Message.timestamp, messages))
    millis = np.fromiter([s[1] for s in stamps], dtype=np.int64, count=count)
    kinds = np.fromiter([s[0] for s in stamps], dtype=np.int32, count=count)
    columns = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.array(np.full(count, partition, dtype=np.int32)),
        offsets,
        # Spark's microseconds; librdkafka's types 0/1/2 (none/create/log append) are Spark's -1/0/1.
        pa.array(millis * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(kinds - 1),
    ]
    if len(schema) == 8:
        columns.append(pa.array(list(map(Message.headers, messages)), HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(options: SourceOptions, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``[rng.start, rng.end)`` as Arrow batches; closes its consumer."""
    if rng.size == 0:
        return
    schema = arrow_schema(options.include_headers)
    consumer = open_consumer(options)
    # Millions of short-lived message objects would trigger the cyclic GC over and over; they hold no cycles.
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield from _read(consumer, options, rng, schema)
    finally:
        if collecting:
            gc.enable()
        consumer.close()


def _read(consumer: Consumer, options: SourceOptions, rng: OffsetRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    label = f"{rng.topic}:{rng.partition}"
    consumer.assign([KafkaTopicPartition(rng.topic, rng.partition, rng.start)])
    position = rng.start
    patience = options.poll_timeout_ms / 1000.0
    last_progress = time.monotonic()
    while position < rng.end:
        messages = consumer.consume(num_messages=min(CONSUME_BATCH, rng.end - position), timeout=1.0)
        if not messages:
            if time.monotonic() - last_progress > patience:
                raise KafkaAccessError(
                    f"no records from {label} at offset {position} for {patience:.0f}s although the batch "
                    f"planned to read up to {rng.end}; check the brokers, or raise kafkaConsumer.pollTimeoutMs"
                )
            continue
        last_progress = time.monotonic()
        records = messages
        if any(map(Message.error, messages)):
            records = [m for m in messages if m.error() is None]
            for event in (m for m in messages if m.error() is not None):
                if _end_of_partition(consumer, options, rng, event, position):
                    position = rng.end
        if records:
            if records[0].offset() > position:
                _skipped(options, label, position, records[0].offset())
            if records[-1].offset() >= rng.end:
                records = [m for m in records if m.offset() < rng.end]
        if records:
            position = records[-1].offset() + 1
            yield records_to_batch(records, rng.topic, rng.partition, schema)


def _end_of_partition(consumer: Consumer, options: SourceOptions, rng: OffsetRange, event, position: int) -> bool:
    """Handle an error event; True when the range is complete (the partition ends at or after its end)."""
    error = event.error()
    label = f"{rng.topic}:{rng.partition}"
    if error.code() == KafkaError._PARTITION_EOF:
        if event.offset() >= rng.end:
            return True
        low, high = consumer.get_watermark_offsets(KafkaTopicPartition(rng.topic, rng.partition), timeout=10)
        if high >= rng.end:
            return False  # the end is there: more records will come with the next fetch
        _lost(options, label, position, rng.end, low, high, "the partition now ends before the planned end offset")
        return True
    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        low, high = consumer.get_watermark_offsets(KafkaTopicPartition(rng.topic, rng.partition), timeout=10)
        _lost(options, label, position, rng.end, low, high, str(error))
        return False
    if error.fatal() or not error.retriable():
        raise KafkaAccessError(f"reading {label} at offset {position} failed: {error}")
    log.warning("retriable error reading %s at offset %d: %s", label, position, error)
    return False


def _lost(options: SourceOptions, label: str, position: int, end: int, low: int, high: int, why: str) -> None:
    message = data_loss_message(label, position, end, low, high, why)
    if options.fail_on_data_loss:
        raise DataLossError(message)
    log.warning("%s", message)


def _skipped(options: SourceOptions, label: str, expected: int, got: int) -> None:
    # Compacted topics skip offsets legitimately; only say so when failOnDataLoss=false reset the position.
    if not options.fail_on_data_loss:
        log.warning("%s: offsets %d..%d are not in Kafka any more; reading on from %d", label, expected, got - 1, got)


def data_loss_message(label: str, start: int, end: int | None, low: int, high: int, why: str) -> str:
    """The one wording of data loss, used by planning and reading."""
    wanted = f"offsets {start}..{end - 1}" if end is not None and end > start else f"offset {start}"
    return (
        f"data loss on {label}: the query needs {wanted} but Kafka holds [{low}, {high}) ({why}). "
        "To go on, reset the query's offsets to ones Kafka still has (e.g. to earliest), or set the option "
        "failOnDataLoss=false to skip the lost records"
    )
