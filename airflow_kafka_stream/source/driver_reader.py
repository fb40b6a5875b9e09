"""Reading a batch on the driver while Spark plans it, so that no Python task runs.

A Python task costs Spark tens of milliseconds before it reads a record (a Python worker, the
pickled reader, an Arrow stream back to the JVM), more than reading a few hundred records from
Kafka. PySpark has a driver-side read for that: when a reader's planning call hands back the
batch's records, PySpark sends them to the JVM with the plan, the JVM puts them in its block
manager, and the batch's single task reads them from there. The JVM decides this per batch
(records handed back: one cached partition; none: ordinary Python tasks), and PySpark asks a
reader for records only when it is its driver-side wrapper (``_SimpleStreamReaderWrapper``).

So :class:`KafkaDriverReader` is such a wrapper, and places each batch by the query's rule
(read_placement.py): it plans the batch exactly as the executors' reader does (the same object
does the planning: start position, read limit, drain, data loss, availableNow), then either
reads the planned ranges on the driver with the same read loop (through consumers it keeps between
batches, see driver_consumers.py), or hands Spark the same tasks the executors' reader would. What a batch holds never depends on where it was read, and a
checkpoint may move between modes at any restart.

A batch Spark must run again after a restart (planned, not committed) is not in a new driver's
memory: Spark asks for its partitions without planning it, and tasks read it from the
checkpoint's offsets.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper
from pyspark.sql.streaming.datasource import ReadLimit

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.source.driver_consumers import DriverConsumers
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.read_placement import ReadPlacement
from airflow_kafka_stream.source.stream_reader import KafkaRange, KafkaStreamReader, parse_offsets

log = logging.getLogger(__name__)

#: Partitions of one batch the driver reads at once. A small range's read is mostly waiting for the
#: consumer's connection and first fetch, which librdkafka and the C reader do without the GIL.
READ_THREADS = 8

#: Batches read on the driver and not yet handed to Spark: Spark plans one batch at a time, so
#: more than this means batches were planned and never run (a stopped query); the oldest go.
MAX_PREFETCHED = 2


@dataclass
class _Prefetched:
    """A planned batch read on the driver, waiting for Spark to ask for its partitions."""

    start: dict
    end: dict
    ranges: tuple[OffsetRange, ...]
    batches: list[pa.RecordBatch]


class KafkaDriverReader(_SimpleStreamReaderWrapper):
    """Plans each batch, and reads it on the driver when the placement rule says so."""

    def __init__(self, planner: KafkaStreamReader, placement: ReadPlacement) -> None:
        # PySpark's runner asks ``simple_reader`` whether availableNow is supported and prepares it there.
        super().__init__(planner)  # type: ignore[arg-type]
        self.planner = planner
        self.placement = placement
        self._prefetched: list[_Prefetched] = []
        #: The tasks of the batch planned last, for Spark's partitions() call that follows (one plan, not two).
        self._planned: tuple[dict, dict, Sequence[InputPartition]] | None = None
        self._consumers = DriverConsumers(planner.options)
        planner.known_watermarks = self._consumers.cached_watermarks

    def __getstate__(self) -> dict:
        """Pickled for Spark's tasks: without the driver's batches and consumers (they stay here)."""
        return {**self.__dict__, "_prefetched": [], "_planned": None, "_consumers": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._consumers = DriverConsumers(self.planner.options)
        self.planner.known_watermarks = self._consumers.cached_watermarks

    # -- planning (the driver's Python process that serves the source to Spark) ----------------

    def initialOffset(self) -> dict:
        return self.planner.initialOffset()

    def getDefaultReadLimit(self) -> ReadLimit:
        return self.planner.getDefaultReadLimit()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        end = self.planner.latestOffset(start, limit)
        if end is start:  # nothing new, or draining: Spark's own object goes back (see offsets_text)
            return start
        tasks = self.planner.partitions(start, end)
        self._planned = (parse_offsets(start), parse_offsets(end), tasks)
        ranges = tuple(rng for task in tasks for rng in task.ranges)
        self._consumers.keep_only(self.planner.partitions_seen())
        if self.placement.on_driver(sum(rng.size for rng in ranges)):
            batches = self._read_side_by_side(ranges, self.placement.byte_budget)
            if batches is not None:
                self._prefetched = [*self._prefetched, _Prefetched(start, end, ranges, batches)][-MAX_PREFETCHED:]
                return end
        # Spark tasks read this batch: the driver's consumers would read on from where it starts.
        self._consumers.forget(TopicPartition(rng.topic, rng.partition) for rng in ranges)
        return end

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        entry = self._find(start, end)
        if entry is not None:
            return [KafkaRange(entry.ranges)]  # Spark's driver-side read takes exactly one partition
        planned = self._planned
        if planned is not None and planned[:2] == (parse_offsets(start), parse_offsets(end)):
            return planned[2]
        return self.planner.partitions(start, end)  # a batch planned by an earlier driver, run again

    def getCache(self, start: dict, end: dict) -> Iterator[pa.RecordBatch] | None:
        """The batch's records when they were read on the driver; None: Spark runs the planned tasks."""
        entry = self._find(start, end)
        if entry is None:
            return None
        # Spark keeps them in its block manager from here on (and asks no more for this batch).
        self._prefetched.remove(entry)
        return iter(entry.batches)

    def commit(self, end: dict) -> None:
        """Nothing to commit (the job runtime commits group offsets); a batch ending at ``end`` that Spark never
        took is let go (the rest are bounded by MAX_PREFETCHED)."""
        done = parse_offsets(end)
        self._prefetched = [entry for entry in self._prefetched if parse_offsets(entry.end) != done]

    def reportLatestOffset(self) -> dict | None:
        return self.planner.reportLatestOffset()

    def stop(self) -> None:
        self._prefetched = []
        self._consumers.close()
        self.planner.stop()

    # -- reading (executors, for batches the driver did not read) -----------------------------

    def read(self, partition: KafkaRange) -> Iterator:  # type: ignore[override]
        return self.planner.read(partition)

    # -- helpers --------------------------------------------------------------------------------

    def _find(self, start: dict, end: dict) -> _Prefetched | None:
        begin, finish = parse_offsets(start), parse_offsets(end)
        for entry in self._prefetched:
            if parse_offsets(entry.start) == begin and parse_offsets(entry.end) == finish:
                return entry
        return None

    def _read_side_by_side(self, ranges: Sequence[OffsetRange], byte_budget: int | None) -> list[pa.RecordBatch] | None:
        """The batch's records in the order of the plan, its partitions read in threads; None when they
        grew past ``byte_budget`` (the batch is then read by tasks, and the driver holds nothing of it)."""
        budget = _Budget(byte_budget)

        def read_one(rng: OffsetRange) -> list[pa.RecordBatch]:
            return self._consumers.read(rng, lambda batch: budget.take(batch.nbytes))

        if len(ranges) <= 1:
            parts = [read_one(rng) for rng in ranges]
        else:
            with ThreadPoolExecutor(min(READ_THREADS, len(ranges)), thread_name_prefix="kafka_stream-read") as pool:
                parts = list(pool.map(read_one, ranges))
        if budget.exceeded:
            log.info("kafka_stream: a batch of %d records grew past %d bytes while read on the driver; "
                     "Spark tasks read it", sum(r.size for r in ranges), byte_budget)
            return None
        return [batch for part in parts for batch in part]


class _Budget:
    """Bytes read so far by a batch's threads, against a limit (None: no limit)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self.exceeded = False
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        if self.limit is None:
            return True
        with self._lock:
            self.used += size
            self.exceeded = self.exceeded or self.used > self.limit
            return not self.exceeded
