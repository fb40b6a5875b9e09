"""The driver's consumers, kept between batches so that the next batch is fetched while Spark runs this one.

A batch read on the driver is small, so most of its read is not the records but getting to them: a
new consumer connects, sends its first fetch, and waits while the broker finds the offset (a few
milliseconds on Kafka; tens on the test broker with a partition of single-record batches, and more
for old offsets in tiered storage). A consumer kept assigned after its range goes on fetching the
records that follow, in librdkafka's background threads, while Spark commits the batch and runs it;
when the next batch starts where the last one ended, its records are already in the consumer's
queue. Measured on the test broker with 300-record batches of single-record log batches: 34 ms to
read a batch with new consumers, under 1 ms with kept ones. All kept consumers together fetch ahead
about one driver-read batch (``driverReadMaxRecords`` and ``driverReadMaxBytes``, shared among the
partitions the query reads), far below what a task's consumer prefetches.

A kept consumer serves the next range only when that range starts at the offset after the last
one it handed out and it consumed nothing past it; otherwise it is moved there (``assign``, a local
operation that drops what it prefetched). What it prefetches is bounded (prefetch_settings), and so is
the number kept (MAX_KEPT); consumers of partitions the query no longer reads, or whose batch went
to Spark tasks, are closed. A ``subscribePattern`` query keeps none: its topics come and go, and
librdkafka 2.16 can crash a client that fetched a topic which is deleted and created again.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

import pyarrow as pa

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.watermarks import watermark_problem
from airflow_kafka_stream.source.arrow_rows import (
    PartitionRead,
    arrow_schema,
    consumer_config,
    open_partition,
    read_polls,
)
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.partition_polls import PartitionPolls
from airflow_kafka_stream.source.source_options import SourceOptions
from airflow_kafka_stream.source.subscription import SUBSCRIBE_PATTERN

log = logging.getLogger(__name__)

#: At the log's end a kept consumer long-polls: a new record comes back at once, and an idle partition
#: costs the broker a fetch every this many ms instead of the reads' 10 (the user's setting wins).
KEPT_FETCH_WAIT_MS = 100

#: The least a kept consumer may fetch ahead, whatever the number of partitions.
MIN_QUEUE_RECORDS = 1_000
MIN_QUEUE_KBYTES = 1_024

#: Consumers kept at most (each holds its broker connections and librdkafka's threads).
MAX_KEPT = 64


class _Kept:
    def __init__(self, polls: PartitionPolls, next_offset: int | None) -> None:
        self.polls = polls
        #: The offset of the record it hands out next, when it can read on from there; else None.
        self.next_offset = next_offset


class DriverConsumers:
    """One kept consumer per partition the driver reads; each used by one read at a time."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.enabled = options.subscription.kind != SUBSCRIBE_PATTERN
        self._schema = arrow_schema(options.include_headers)
        self._first_wait = int(consumer_config(options, None, self.prefetch_settings(1))["fetch.wait.max.ms"])
        self._partitions = 1
        self._kept: OrderedDict[TopicPartition, _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, rng: OffsetRange, take: Callable[[pa.RecordBatch], bool]) -> list[pa.RecordBatch]:
        """The records of ``rng``, as the executors' reader reads them; stops early (and keeps nothing)
        when ``take`` refuses a batch."""
        tp = TopicPartition(rng.topic, rng.partition)
        with self._lock:
            kept = self._kept.pop(tp, None)
        if kept is None:
            polls = self._open(rng, rng.start, None)
        else:
            polls = kept.polls
            if kept.next_offset != rng.start:
                polls.assign(rng.start)
        reading = PartitionRead(polls, self._first_wait, lambda start, wait: self._open(rng, start, wait))
        batches: list[pa.RecordBatch] = []
        try:
            for batch in read_polls(reading, self.options, rng):
                if not take(batch):
                    reading.polls.close()
                    return []
                batches.append(batch)
        except BaseException:
            reading.polls.close()
            raise
        self._keep(tp, reading.polls, rng.end if reading.ended_at_end else None)
        return batches

    def cached_watermarks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]] | None:
        """The partitions' (low, high) from the kept consumers' last fetch answers, without asking the broker;
        None unless every partition has a kept consumer with a valid answer.

        A kept consumer long-polls at the log's end, so its answer is at most one fetch old: a record that
        arrived since may be missed by this batch and is planned with the next one. Nothing is ever planned
        past what Kafka holds, since a cached high watermark only trails the real one."""
        found = {}
        with self._lock:
            kept = {tp: self._kept.get(tp) for tp in partitions}
        for tp, item in kept.items():
            marks = item.polls.cached_watermarks() if item is not None else None
            if marks is None or watermark_problem(marks) is not None:
                return None
            found[tp] = marks
        return found

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Close the consumers of ``partitions`` (their next batch was read elsewhere, or they are gone)."""
        with self._lock:
            dropped = [self._kept.pop(tp) for tp in list(partitions) if tp in self._kept]
        for kept in dropped:
            kept.polls.close()

    def prefetch_settings(self, partitions: int) -> dict[str, int]:
        """A new kept consumer's prefetch: its share of one driver-read batch among ``partitions``."""
        share = max(1, min(partitions, MAX_KEPT))
        return {"queued.min.messages": max(MIN_QUEUE_RECORDS, self.options.driver_read_max_records // share),
                "queued.max.messages.kbytes": max(MIN_QUEUE_KBYTES, self.options.driver_read_max_bytes // 1024 // share),
                "fetch.wait.max.ms": KEPT_FETCH_WAIT_MS}

    def keep_only(self, partitions: Iterable[TopicPartition]) -> None:
        """Close the consumers of partitions not in ``partitions`` (the query no longer reads them)."""
        wanted = set(partitions)
        self._partitions = max(1, len(wanted))
        with self._lock:
            stale = [tp for tp in self._kept if tp not in wanted]
        self.forget(stale)

    def close(self) -> None:
        with self._lock:
            kept, self._kept = list(self._kept.values()), OrderedDict()
        for item in kept:
            item.polls.close()

    def _open(self, rng: OffsetRange, start: int, fetch_wait_ms: int | None) -> PartitionPolls:
        return open_partition(self.options, rng._replace(start=start), self._schema, fetch_wait_ms,
                              self.prefetch_settings(self._partitions))

    def _keep(self, tp: TopicPartition, polls: PartitionPolls, next_offset: int | None) -> None:
        if not self.enabled:
            polls.close()
            return
        with self._lock:
            self._kept[tp] = _Kept(polls, next_offset)
            evicted = self._kept.popitem(last=False)[1] if len(self._kept) > MAX_KEPT else None
        if evicted is not None:
            evicted.polls.close()
