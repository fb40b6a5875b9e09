"""``readMode=driver``: the driver reads each small batch while it plans it, and no Python task runs.

A Python task costs Spark tens of milliseconds before it reads a record (a Python worker, the
pickled reader, an Arrow stream back to the JVM), more than reading a few hundred records from
Kafka. PySpark's ``SimpleDataSourceStreamReader`` avoids the task: Spark asks it for the latest
offset, it reads the records up to that offset in the same call, and PySpark sends them to the
JVM with the batch's plan; the batch's task reads them from Spark's block manager. This class is
that reader for ``kafka_stream``. It plans exactly as the executors' reader does (the same
object does the planning: start position, read limit, drain, data loss, availableNow), then
reads the planned ranges with the same range reader, so what a batch holds does not depend on
the mode.

A batch Spark must read again (a query restarted with a planned but uncommitted batch) is not
in the driver's memory any more: PySpark then reads it in a task through ``readBetweenOffsets``,
which reads the ranges as the executors' reader would. Offsets and their text in the checkpoint
are the same in both modes, so a query may switch modes across restarts.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
from pyspark.sql.datasource import SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from airflow_kafka_stream.spark.arrow_rows import read_range
from airflow_kafka_stream.spark.source import KafkaStreamReader
from airflow_kafka_stream.spark.source_options import SourceOptions

#: Partitions of one batch the driver reads at once. A small range's read is mostly waiting for the
#: consumer's connection and first fetch, which librdkafka and the C reader do without the GIL.
READ_THREADS = 8


class KafkaDriverReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans a batch and reads its records in one call, on the driver."""

    def __init__(self, options: SourceOptions) -> None:
        self.planner = KafkaStreamReader(options)

    def initialOffset(self) -> dict:
        return self.planner.initialOffset()

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepareForTriggerAvailableNow()

    def read(self, start: dict) -> tuple[Iterator[pa.RecordBatch], dict]:
        end = self.planner.latestOffset(start, self.planner.getDefaultReadLimit())
        if end is start:  # nothing new, or draining: Spark's own object goes back (see offsets_text)
            return iter(()), start
        # All of it now: PySpark keeps the iterator until the batch is planned and copies it, which a
        # generator does not survive; maxOffsetsPerTrigger bounds what is held.
        return iter(self._read_side_by_side(start, end)), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[pa.RecordBatch]:
        return self._records(start, end)

    def commit(self, end: dict) -> None:
        """Nothing to do: group offsets are committed by the job runtime after Spark's own commit."""

    def _read_side_by_side(self, start: dict, end: dict) -> list[pa.RecordBatch]:
        """The batch's records, its partitions read in threads, in the order of the plan."""
        options = self.planner.options
        ranges = [(rng, task.topic_ids.get(rng.topic)) for task in self.planner.partitions(start, end)
                  for rng in task.ranges]
        if len(ranges) <= 1:
            return [batch for rng, topic_id in ranges for batch in read_range(options, rng, topic_id)]
        with ThreadPoolExecutor(min(READ_THREADS, len(ranges)), thread_name_prefix="kafka_stream-read") as pool:
            parts = list(pool.map(lambda item: list(read_range(options, *item)), ranges))
        return [batch for part in parts for batch in part]

    def _records(self, start: dict, end: dict) -> Iterator[pa.RecordBatch]:
        for task in self.planner.partitions(start, end):
            yield from self.planner.read(task)
