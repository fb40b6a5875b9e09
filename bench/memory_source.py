"""A trivial Python streaming data source for bench_small_batch: the same rows as kafka_stream,
from memory. Importable by Spark's Python workers (bench_small_batch puts the repository on their
PYTHONPATH), so tasks unpickle it by reference, as they do kafka_stream's reader."""

from __future__ import annotations

import os
import time

import pyarrow as pa
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition, SimpleDataSourceStreamReader

from airflow_kafka_stream.source.arrow_rows import arrow_schema
from airflow_kafka_stream.source.source import source_schema

VALUE = b"x" * 90


class MemoryReader(DataSourceStreamReader):
    def __init__(self, rows: int, partitions: int) -> None:
        self.rows, self.count = rows, partitions

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def latestOffset(self, start: dict, limit) -> dict:
        return {"offset": start["offset"] + self.rows}

    def partitions(self, start: dict, end: dict) -> list:
        share = self.rows // self.count
        return [InputPartition((p, start["offset"] // self.count, share)) for p in range(self.count)]

    def read(self, partition):
        yield rows_batch(*partition.value)

    def commit(self, end: dict) -> None:
        pass


class MemorySimpleReader(SimpleDataSourceStreamReader):
    """The same rows, made on the driver while Spark plans the batch (as kafka_stream's readMode=driver)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def read(self, start: dict):
        return iter([rows_batch(0, start["offset"], self.rows)]), {"offset": start["offset"] + self.rows}

    def readBetweenOffsets(self, start: dict, end: dict):
        return iter([rows_batch(0, start["offset"], end["offset"] - start["offset"])])


def rows_batch(number: int, first: int, rows: int) -> pa.RecordBatch:
    """``rows`` records of partition ``number`` from offset ``first``, in kafka_stream's columns."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"%010d" % i for i in range(first, first + rows)], pa.binary()),
            pa.array([VALUE] * rows, pa.binary()),
            pa.array(["bench"] * rows, pa.string()),
            pa.array([number] * rows, pa.int32()),
            pa.array(range(first, first + rows), pa.int64()),
            pa.array([time.time_ns() // 1000] * rows, pa.timestamp("us", tz="UTC")),
            pa.array([0] * rows, pa.int32()),
        ],
        schema=arrow_schema(False),
    )


class MemorySource(DataSource):
    """Options: rowsPerBatch, numPartitions, onDriver (true: the driver-side reader)."""

    @classmethod
    def name(cls) -> str:
        return "bench_memory"

    def schema(self):
        return source_schema(False)

    def streamReader(self, schema):
        if self.options.get("onDriver") == "true":
            raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"})
        return MemoryReader(int(self.options.get("rowsPerBatch", 300)), int(self.options.get("numPartitions", 3)))

    def simpleStreamReader(self, schema):
        return MemorySimpleReader(int(self.options.get("rowsPerBatch", 300)))


def workers_can_import_this() -> None:
    """Put the repository on the Python workers' path (before the JVM starts)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
