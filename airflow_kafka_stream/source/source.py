"""The ``kafka_stream`` Spark streaming source: Spark's Kafka source as a Python data source.

Use it like ``format("kafka")``::

    spark.readStream.format("kafka_stream")
        .option("kafka.bootstrap.servers", "broker:9092")
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .load()

Options are documented in :mod:`airflow_kafka_stream.source.source_options`. Offsets in the
checkpoint have the JVM connector's shape and text (``{"topic":{"0":23}}``, next offset to
read; see :mod:`.offsets_text`), so checkpoint tools work on either. The start options resolve to real offsets in
``initialOffset``; a query restarted from its checkpoint never calls it.

The planner and reader live in :mod:`.stream_reader` (and :mod:`.driver_reader` for reads on the driver); this
module is the data source Spark registers, which picks between them.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from airflow_kafka_stream.kafka import metadata
from airflow_kafka_stream.moved import moved_attributes
from airflow_kafka_stream.source import offsets_text
from airflow_kafka_stream.source.binding import binding_path, bound_options
from airflow_kafka_stream.source.driver_reader import KafkaDriverReader
from airflow_kafka_stream.source.source_options import READ_ON_EXECUTORS, parse_source_options
from airflow_kafka_stream.source.stream_reader import KafkaStreamReader, placement_of, planning_config

log = logging.getLogger(__name__)

FORMAT_NAME = "kafka_stream"


def register(spark) -> None:
    """Make ``spark.readStream.format("kafka_stream")`` available in this session.

    A local session's cores are handed to the source (a subclass that carries them), which then
    reads a batch in at most one task per core; a cluster's executors come and go, so there a
    batch keeps a task per partition (see ``group_ranges``).
    """
    slots = local_task_slots(spark)
    if not slots:
        spark.dataSource.register(KafkaStreamDataSource)
        return
    spark.dataSource.register(type("LocalKafkaStreamDataSource", (KafkaStreamDataSource,),
                                   {"task_slots": slots, "__module__": __name__}))


def local_task_slots(spark) -> int | None:
    """The cores of a local-mode session (``local[N]``), or None (a cluster, or Spark Connect)."""
    try:
        context = spark.sparkContext
        return int(context.defaultParallelism) if str(context.master).startswith("local") else None
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: no hint, a task per partition
        return None


def source_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source columns; ``headers`` only with includeHeaders=true."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class KafkaStreamDataSource(DataSource):
    """Validates the options when the DataFrame is defined, so bad options fail before any query starts."""

    #: The session's cores when known (see :func:`register`): a batch's tasks, at most.
    task_slots: int | None = None

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = parse_source_options(options)

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        return source_schema(self.parsed.include_headers)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # Called in the Python process that serves this source's offsets to Spark: store them as the JVM
        # connector does (compact JSON), without changing the text of offsets Spark already holds.
        offsets_text.install_in_runner()
        # A query built once and started more than once (a standby's rehearsal, then its run) reads the options
        # of each start from its binding file; the instance was pickled when the DataFrame was defined.
        parsed = self.parsed
        if binding_path(self.options):
            parsed = parse_source_options(bound_options(self.options, while_waiting=self._warm_up))
        planner = KafkaStreamReader(parsed, self.task_slots)
        placement = placement_of(parsed)
        if placement.mode == READ_ON_EXECUTORS:
            return planner
        return KafkaDriverReader(planner, placement)

    def _warm_up(self) -> None:
        """While a query started ahead of a standby's go waits for it: what the first batch would do first in this
        process, once (open the planning client, which is kept for the run; bind the C reader)."""
        metadata.list_topic_partitions(planning_config(self.parsed))
        placement_of(self.parsed)


#: The planner and reader moved to ``source.stream_reader``; what was imported from here keeps working, warned.
__getattr__ = moved_attributes(__name__, {name: f"airflow_kafka_stream.source.stream_reader:{name}"
                                          for name in ("KafkaRange", "parse_offsets")})
