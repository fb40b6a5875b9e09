"""The run whose loaded classes become the test suite's Spark class archive (see scripts/setup-spark-cds).

A short stand-in for what the suite's drivers do: a streaming query from a Python data source with state, a file
sink and a foreachBatch, and a batch read; every class it loads is archived, so the JVMs of the suite load them
from the archive instead of from the jars.
"""

from __future__ import annotations

import sys
import tempfile

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.functions import col, count


class _Counter(DataSource):
    @classmethod
    def name(cls) -> str:
        return "archive_counter"

    def schema(self) -> str:
        return "id long, key string"

    def streamReader(self, schema):
        return _CounterReader()


class _CounterReader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"offset": 0}

    def latestOffset(self) -> dict:
        self._end = getattr(self, "_end", 0) + 10
        return {"offset": self._end}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition((start["offset"], end["offset"]))]

    def read(self, partition):
        first, last = partition.value
        for i in range(first, last):
            yield (i, f"k{i % 3}")


def main() -> None:
    spark = SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    spark.dataSource.register(_Counter)
    with tempfile.TemporaryDirectory() as work:
        counts = spark.readStream.format("archive_counter").load().groupBy("key").agg(count("*").alias("n"))
        query = (counts.writeStream.outputMode("update").option("checkpointLocation", f"{work}/state")
                 .foreachBatch(lambda frame, _batch: frame.collect()).trigger(processingTime="100 milliseconds")
                 .start())
        rows = (spark.readStream.format("archive_counter").load().where(col("id") % 2 == 0).writeStream
                .format("parquet").option("path", f"{work}/out").option("checkpointLocation", f"{work}/files")
                .trigger(processingTime="100 milliseconds").start())
        for stream in (query, rows):
            while (stream.lastProgress or {}).get("batchId", -1) < 3:
                stream.awaitTermination(0.5)
                if stream.exception() is not None:
                    sys.exit(f"the archive's workload failed: {stream.exception()}")
            stream.stop()
        print(spark.read.parquet(f"{work}/out").count())
    spark.stop()


if __name__ == "__main__":
    main()
