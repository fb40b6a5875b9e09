"""Read one offset range from Kafka into Arrow record batches with Spark's Kafka columns.

This runs on executors and is the hot path. A partition is polled by the C reader
(native_reader.py), or through confluent-kafka in Python (partition_polls.py) when the
user asks for it or allows the fallback (a task refuses to run slower unnoticed); both return the same polls, and every decision about them (end of
range, end of partition, data loss, errors) is made here.
"""

from __future__ import annotations

import gc
import logging
import socket
import sys
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException

from airflow_kafka_stream.core.watermarks import ask_until_valid, watermark_problem
from airflow_kafka_stream.errors import DataLossError, InvalidInputError, KafkaAccessError, ReaderUnavailableError
from airflow_kafka_stream.source.consumer_cache import CONSUMERS, CacheKey
from airflow_kafka_stream.source.control_files import record_skipped
from airflow_kafka_stream.source.native_reader import NativePartition, native_module, native_unavailable_reason
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.partition_polls import HEADERS_TYPE, ConfluentPartition, PartitionPolls
from airflow_kafka_stream.source.source_options import SourceOptions

log = logging.getLogger(__name__)

#: Messages fetched per poll; also the largest Arrow batch handed to Spark.
CONSUME_BATCH = 20_000

#: Fetch settings of a read; the user's kafka.* options win. The prefetch queue stays short (a few
#: fetches of 2 MiB ahead of the reader) so that records are read while they are still in the CPU's
#: cache: a read of 2 million records took 5 to 8% less CPU in all (reader, broker and JVM together;
#: measured alternately in one JVM) than with a queue of 500,000 records and 16 MiB fetches. A short queue
#: needs a short fetch.queue.backoff.ms: librdkafka's 1 s pause, once the queue is over its threshold,
#: made a read with a 50,000-record queue 8 times slower.
READ_DEFAULTS = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 2 * 1024 * 1024,
    "queued.min.messages": 50_000,
    "queued.max.messages.kbytes": 64 * 1024,
    "fetch.queue.backoff.ms": 5,
    # A task reads ranges known to exist, so a fetch waits at the log's end only past the range; a
    # kept consumer's next fetch waits for that one to come back (one fetch per broker at a time).
    "fetch.wait.max.ms": 10,
    # Spark's Kafka source reads at Kafka's default level, and batches are planned to the high
    # watermark; kafka.isolation.level=read_committed plans and reads to the last stable offset.
    "isolation.level": "read_uncommitted",
}

#: How long one poll waits for its records. Short, because a range with offset gaps (compaction,
#: transaction markers) never fills its last poll; kafkaConsumer.pollTimeoutMs bounds the waiting.
POLL_WAIT_SECONDS = 0.1

#: The fetch waits (fetch.wait.max.ms) a read escalates through while a range known to exist gets empty
#: answers. A broker answers a fetch empty when finding the data takes longer than the fetch may wait:
#: an old offset served from tiered storage (before KIP-1018 the fetch's wait was the remote read's
#: timeout), or the test broker's partition of tens of thousands of small batches. The short first wait
#: keeps small batches fast; a longer one lets such a read through.
ESCALATED_FETCH_WAITS_MS = (50, 250, 1000)

#: Polls in a row without a record, while records are known to exist, before the fetch wait is raised.
EMPTY_POLLS_BEFORE_ESCALATING = 2

#: How long one watermark request may take (invalid answers are asked again within pollTimeoutMs).
WATERMARK_TIMEOUT_SECONDS = 10.0

#: Client-side errors librdkafka recovers from by itself (reconnecting, retrying): logged, and
#: bounded by kafkaConsumer.pollTimeoutMs like any other wait for records.
TRANSIENT_ERRORS = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._RESOLVE}
)

#: The topic or partition is gone (deleted): as Spark's source, that is data loss.
GONE_ERRORS = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC})


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


def consumer_config(
    options: SourceOptions, fetch_wait_ms: int | None = None, defaults: Mapping[str, object] | None = None
) -> dict[str, object]:
    """Settings of a read-only, assign-only consumer: it never joins a group or commits.

    ``defaults`` replace some of READ_DEFAULTS (the user's kafka.* options still win); ``fetch_wait_ms``
    replaces the fetch wait of a read that escalated it (see :class:`PartitionRead`)."""
    config: dict[str, object] = {**READ_DEFAULTS, **(defaults or {})}
    config.update(options.kafka)
    if fetch_wait_ms is not None:
        config["fetch.wait.max.ms"] = fetch_wait_ms
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


def _native(options: SourceOptions):
    """The C reader's module when it serves these options, else None (read through confluent-kafka)."""
    return native_module() if options.native_reader and not options.include_headers else None


def consumer_settings(options: SourceOptions) -> Hashable:
    """What makes two partition consumers interchangeable: the reader, its columns and the client
    settings (the generated group.id aside, since such a consumer never uses its group)."""
    config = consumer_config(options)
    if "group.id" not in options.kafka:
        del config["group.id"]
    kind = "python" if _native(options) is None else "native"
    return kind, options.include_headers, tuple(sorted((name, str(value)) for name, value in config.items()))


def open_partition(
    options: SourceOptions, rng: OffsetRange, schema: pa.Schema, fetch_wait_ms: int | None = None,
    defaults: Mapping[str, object] | None = None,
) -> PartitionPolls:
    """A consumer assigned to ``rng``'s partition at its start: the C reader when it can serve."""
    config = consumer_config(options, fetch_wait_ms, defaults)
    module = _native(options)
    if module is None and options.native_reader and not options.include_headers and not options.allow_python_fallback:
        raise ReaderUnavailableError(
            f"the C reader is unavailable on this executor ({socket.gethostname()}, {sys.executable}): "
            f"{native_unavailable_reason()}. Ship an environment with the built extension (a packed "
            "environment with --archives, see docs/cluster.md; a --py-files zip cannot carry it), or set the "
            "source option kafkaConsumer.allowPythonFallback=true to read in Python (about 30% slower)")
    try:
        if module is not None:
            return NativePartition(module, config, rng, schema)
        return ConfluentPartition(Consumer(config), rng, schema)
    except (KafkaException, ValueError) as exc:
        raise InvalidInputError(
            f"the Kafka client refused the kafka.* options: {exc}; fix or remove the option it names "
            "(names are librdkafka's, see its CONFIGURATION.md)"
        ) from exc


def read_range(options: SourceOptions, rng: OffsetRange, topic_id: str | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``[rng.start, rng.end)`` as Arrow batches.

    With kafkaConsumer.cache (off by default) and the topic's id as the planner saw it, the consumer
    comes from, and after a complete read goes back to, this worker's cache (consumer_cache.py);
    otherwise, or when the read fails or is abandoned, it is closed here. The id keeps a consumer
    from ever meeting a deleted and recreated topic of the same name (librdkafka 2.16 crashes when
    a client that fetched a topic by its old id is pointed at the new one).
    """
    if rng.size == 0:
        return
    schema = arrow_schema(options.include_headers)
    key = None
    if options.consumer_cache and topic_id:
        key = CacheKey(rng.topic, rng.partition, (topic_id, consumer_settings(options)))
    if key is None:
        consumer = open_partition(options, rng, schema)
    else:
        consumer = CONSUMERS.take(key, rng.start, lambda: open_partition(options, rng, schema))
    partition = PartitionRead(consumer, first_fetch_wait_ms(options),
                           lambda position, wait: open_partition(options, rng._replace(start=position), schema, wait))
    # The Python reader's millions of short-lived message objects would trigger the cyclic GC over
    # and over; they hold no cycles. The C reader makes no per-record objects.
    collecting = gc.isenabled() and isinstance(consumer, ConfluentPartition)
    if collecting:
        gc.disable()
    complete = False
    try:
        yield from read_polls(partition, options, rng)
        complete = True
    finally:
        if collecting:
            gc.enable()
        if complete and key is not None and not partition.escalated:
            CONSUMERS.give_back(key, partition.polls, options.cache_timeout_ms / 1000.0)
        else:
            partition.polls.close()


def first_fetch_wait_ms(options: SourceOptions) -> int:
    """The fetch wait a read starts with: the user's kafka.fetch.wait.max.ms, else the short default."""
    return int(consumer_config(options)["fetch.wait.max.ms"])


class PartitionRead:
    """The consumer of one range's read, and the fetch waits it has tried.

    librdkafka takes fetch.wait.max.ms when a client is made, so a read that escalates its wait
    reopens its consumer (``reopen(offset, wait_ms)``) at the offset it has reached; records the old
    one fetched and did not hand out are fetched again by the new one."""

    def __init__(self, polls: PartitionPolls, first_wait_ms: int,
                 reopen: Callable[[int, int], PartitionPolls]) -> None:
        self.polls = polls
        self._reopen = reopen
        self.waits_tried = [first_wait_ms]
        #: After a read: it handed out the range's last offset and consumed nothing past it, so the
        #: consumer's next record is the one at the range's end (a kept consumer may read on from there).
        self.ended_at_end = False
        self._next_waits = [wait for wait in ESCALATED_FETCH_WAITS_MS if wait > first_wait_ms]

    @property
    def escalated(self) -> bool:
        return len(self.waits_tried) > 1

    def escalate(self, position: int, label: str) -> bool:
        """Reopen the consumer at ``position`` with the next longer fetch wait; False when none is left."""
        if not self._next_waits:
            return False
        wait = self._next_waits.pop(0)
        log.info("%s: the broker answered fetches at offset %d empty with fetch.wait.max.ms=%d although the "
                 "records exist; reading on with %d ms", label, position, self.waits_tried[-1], wait)
        self.polls.close()
        self.polls = self._reopen(position, wait)
        self.waits_tried.append(wait)
        return True


def read_polls(partition: PartitionRead, options: SourceOptions, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    label = f"{rng.topic}:{rng.partition}"
    position = rng.start
    patience = options.poll_timeout_ms / 1000.0
    last_progress = time.monotonic()
    empty_polls = 0
    while position < rng.end:
        polled = partition.polls.poll(min(CONSUME_BATCH, rng.end - position), POLL_WAIT_SECONDS, rng.end)
        if polled.batch is not None and polled.first_offset < position:
            # Offsets only grow, unless the client was reset to earliest because the partition now
            # ends below this range (recreated or truncated topic): those records are not the range's.
            low, high = _watermarks(partition.polls, options, label)
            _lost(options, label, position, rng.end, low, high, "the partition was reset below the range's start")
            return
        partition.ended_at_end = polled.last_offset == rng.end - 1 and not polled.beyond_end
        # Records first: librdkafka puts an end-of-partition event after the records it follows.
        if polled.batch is not None:
            if polled.first_offset > position:
                _skipped(options, label, position, polled.first_offset)
            position = polled.last_offset + 1
            last_progress = time.monotonic()
            empty_polls = 0
            yield polled.batch
        complete = polled.beyond_end  # offsets only grow: nothing below the end is left to come
        for error, offset in polled.events:
            complete = _end_of_partition(partition.polls, options, rng, error, offset, position) or complete
        if complete:
            position = rng.end
        if position >= rng.end:
            break
        if polled.batch is None and not polled.events:
            empty_polls += 1
            if empty_polls >= EMPTY_POLLS_BEFORE_ESCALATING and partition.escalate(position, label):
                empty_polls = 0
        if time.monotonic() - last_progress > patience:
            waits = ", ".join(str(wait) for wait in partition.waits_tried)
            raise KafkaAccessError(
                f"no records from {label} at offset {position} for {patience:.0f}s although the batch "
                f"planned to read up to {rng.end} (fetch waits tried: {waits} ms); check the brokers, or raise "
                "kafkaConsumer.pollTimeoutMs, or kafka.fetch.wait.max.ms if the broker needs longer to find "
                "old records (tiered storage)"
            )


def _end_of_partition(
    partition: PartitionPolls, options: SourceOptions, rng: OffsetRange, error: KafkaError, offset: int, position: int
) -> bool:
    """Handle an error event; True when the range is complete (the partition ends at or after its end)."""
    label = f"{rng.topic}:{rng.partition}"
    if error.code() == KafkaError._PARTITION_EOF:
        if offset >= rng.end:
            return True
        if not _end_may_be_gone(partition, offset, position, rng.end):
            return False  # more records will come with the next fetch
        low, high = _watermarks(partition, options, label)
        if high >= rng.end:
            return False  # the end is there: more records will come with the next fetch
        _lost(options, label, position, rng.end, low, high, "the partition now ends before the planned end offset")
        return True
    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        low, high = _watermarks(partition, options, label)
        _lost(options, label, position, rng.end, low, high, str(error))
        return False
    if error.code() in GONE_ERRORS:
        _lost(options, label, position, rng.end, -1, -1, str(error))
        return True
    if error.code() in TRANSIENT_ERRORS or (error.retriable() and not error.fatal()):
        log.warning("retriable error reading %s at offset %d: %s", label, position, error)
        return False
    raise KafkaAccessError(f"reading {label} at offset {position} failed: {error}")


def _end_may_be_gone(partition: PartitionPolls, eof_offset: int, position: int, end: int) -> bool:
    """Whether an end-of-partition event below the range's end calls for asking the broker if the partition
    still reaches ``end`` (it may have been truncated or recreated).

    Not when the event is old news: the read has already passed its offset (a kept consumer fetching at the
    log's end of a trickling topic queues one such event per fetch), or the consumer's last fetch answer saw
    the high watermark at or past ``end``. Asking is a round trip that waits behind the consumer's own
    long-polling fetch on the same connection, up to its fetch.wait.max.ms each time: measured, a 50-record
    read from kept consumers took 170-520 ms when every event asked, instead of a few milliseconds.
    """
    if eof_offset < position:
        return False
    cached = partition.cached_watermarks()
    return cached is None or watermark_problem(cached) is not None or cached[1] < end


def _watermarks(partition: PartitionPolls, options: SourceOptions, label: str) -> tuple[int, int]:
    """The partition's (low, high), asked again while the answer is no watermark (e.g. librdkafka's -1001):
    data loss is decided from it, so an invalid answer must end as a Kafka error, never as loss."""

    def ask(_pending: list[str]) -> dict[str, tuple[int, int]]:
        try:
            return {label: partition.watermarks(WATERMARK_TIMEOUT_SECONDS)}
        except KafkaException as exc:
            raise KafkaAccessError(f"asking the broker for the offsets of {label} failed: {exc}") from exc

    budget = options.poll_timeout_ms / 1000.0
    return ask_until_valid(ask, [label], watermark_problem, budget, f"give the watermarks of {label}")[label]


def _lost(options: SourceOptions, label: str, position: int, end: int, low: int, high: int, why: str) -> None:
    message = data_loss_message(label, position, end, low, high, why)
    if options.fail_on_data_loss:
        raise DataLossError(message)
    log.warning("%s", message)
    record_skipped(options.drain_path, label, position, max(position, low), why)


def _skipped(options: SourceOptions, label: str, expected: int, got: int) -> None:
    # Compacted topics skip offsets legitimately; only say so when failOnDataLoss=false reset the position.
    if not options.fail_on_data_loss:
        log.warning("%s: offsets %d..%d are not in Kafka any more; reading on from %d", label, expected, got - 1, got)


def data_loss_message(label: str, start: int, end: int | None, low: int, high: int, why: str) -> str:
    """The one wording of data loss, used by planning and reading."""
    wanted = f"offsets {start}..{end - 1}" if end is not None and end > start else f"offset {start}"
    held = f"Kafka holds [{low}, {high})" if low >= 0 else "Kafka no longer has the partition"
    return (
        f"data loss on {label}: the query needs {wanted} but {held} ({why}). "
        "To go on, reset the query's offsets to ones Kafka still has (e.g. to earliest), or set the option "
        "failOnDataLoss=false to skip the lost records"
    )
