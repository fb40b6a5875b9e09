"""Example pipeline: JSON events from Kafka to parquet, exactly once, poison pills to dead letters.

Input records are ``{"id": "<unique>", "key": "<str>", "ts": "<iso time>", "amount": <number>}``.
Every batch writes, replacing what an earlier attempt of the same batch wrote:

* ``<output>/events/generation=<G>/batch=<id>/``: one row per good input record
  with its topic, partition and offset and the event fields (exactly once under
  replay: a re-run batch overwrites its own directory);
* ``<output>/per_key_minute/generation=<G>/batch=<id>/``: amount and count per key
  and minute within the batch (sum over batches for totals);
* dead letters (``--dead-letter``, default ``<home>/dead_letters``): records that are
  not such JSON, with topic, partition, offset, raw value, error and time.

With ``--totals`` the query is stateful instead: a running amount and count per key (a
streaming aggregation kept in Spark's state store, ``--state-store hdfs`` or ``rocksdb``), and
every batch writes the keys it updated with their totals to
``<output>/totals/generation=<G>/batch=<id>/`` (the newest row of a key is its total). Records
that are not such JSON are left out of the totals.

With ``--output-asset URI`` the output is an Airflow asset: the query gets an event-time watermark on the events'
``ts`` (``--watermark-delay``, default ``PT10M``) and every ``--asset-every`` window (default ``PT1H``) it
completes is announced to Airflow once, so a DAG scheduled on the asset runs once per complete window
(docs/assets.md).

``--source kafka`` reads with Spark's own Kafka connector (``format("kafka")``) instead of this project's
``kafka_stream`` source; everything else stays the same (docs/source.md).

The job records its sink as ``idempotent`` (no ``_spark_metadata`` batch log), so
resets and restores of its home know there is no sink log to keep whole.

Run it::

    python -m airflow_kafka_stream.jobs.example_pipeline --home /data/jobs/orders \\
        --bootstrap localhost:9092 --topic orders --group orders-job --output /data/orders

or with ``spark-submit .../example_pipeline.py --home ...``. Stop it with
``airflow-kafka-stream stop`` (or SIGTERM): it finishes the running batch, exits 0
and prints a summary.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

from airflow_kafka_stream.core.asset_windows import output_asset
from airflow_kafka_stream.core.cluster import spark_url
from airflow_kafka_stream.core.durations import parse_duration
from airflow_kafka_stream.core.spark_kafka_options import KAFKA_STREAM_FORMAT, SOURCE_FORMATS, SPARK_KAFKA_FORMAT
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.properties import read_properties
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime, client_config_from_env
from airflow_kafka_stream.runtime.dead_letter import DeadLetterSink, parse_json_values, split_dead_letters
from airflow_kafka_stream.runtime.kafka_sink import attach_kafka_sink
from airflow_kafka_stream.runtime.session import local_session
from airflow_kafka_stream.source.source import register
from airflow_kafka_stream.storage.files import storage_options_from_env


def event_schema():
    return StructType([
        StructField("id", StringType()),
        StructField("key", StringType()),
        StructField("ts", TimestampType()),
        StructField("amount", DoubleType()),
    ])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="example_pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, help="job home directory or URL")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers, host:port[,host:port]")
    parser.add_argument("--topic", required=True, action="append", help="topic to read (repeat for several)")
    parser.add_argument("--group", required=True, help="consumer group the batch offsets are committed to")
    parser.add_argument("--output", help="output directory or URL (Parquet files)")
    parser.add_argument("--output-topic", help="write the events as JSON to this Kafka topic instead, exactly once: "
                        "a transactional sink, read it with isolation.level=read_committed (docs/sink.md)")
    parser.add_argument("--dead-letter", help="dead-letter directory or kafka://<topic> (default <home>/dead_letters)")
    parser.add_argument("--job-name", help="name shown in the status (default: last part of --home)")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="earliest, latest, group or offsets JSON; used only on a fresh checkpoint")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="upper bound on records per batch")
    parser.add_argument("--source", choices=SOURCE_FORMATS, default=KAFKA_STREAM_FORMAT,
                        help="kafka_stream (this project's source, the default) or kafka (Spark's own connector)")
    parser.add_argument("--read-mode", choices=("auto", "executors", "driver"),
                        help="where batches are read: auto (small batches on the driver while it plans them, large "
                        "ones by Spark tasks), every batch by Spark tasks on the executors, or every batch on the "
                        "driver (needs --max-offsets-per-trigger); see docs/source.md")
    parser.add_argument("--totals", action="store_true",
                        help="stateful: keep a running amount and count per key in Spark's state store and write the "
                        "updated totals each batch (instead of the events)")
    parser.add_argument("--state-store", choices=("hdfs", "rocksdb"), default="hdfs",
                        help="the state store of --totals (fixed by the checkpoint's first batch)")
    parser.add_argument("--state-partitions", type=int, default=4,
                        help="state partitions of --totals (spark.sql.shuffle.partitions; fixed by the checkpoint)")
    parser.add_argument("--trigger-interval", default="0 seconds", help="processing-time trigger, e.g. '5 seconds'")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--heartbeat-seconds", type=float, default=5.0)
    parser.add_argument("--clock-skew-seconds", type=float, default=0.0,
                        help="how far this driver's clock and those of hosts reading its status may be apart")
    parser.add_argument("--drain-timeout-seconds", type=float, default=300.0,
                        help="after this long draining, warn and flag the status; the batch is never cancelled")
    parser.add_argument("--cores", default="2", help="local[N] cores when not run by spark-submit")
    parser.add_argument("--command-config", help="Kafka client properties file (security settings and secrets "
                        "stay out of the process arguments)")
    parser.add_argument("--app-version", default="1", help="application version recorded in job.json and savepoints")
    parser.add_argument("--skip-replays", action="store_true",
                        help="with --output-topic: records a rewind (a reset, a restore) reads again are not written to "
                             "the topic again (docs/sink.md)")
    parser.add_argument("--output-asset", help="the output as an Airflow asset URI (e.g. file:///lake/orders): each "
                        "complete event-time window is announced to Airflow once (docs/assets.md)")
    parser.add_argument("--asset-every", default="PT1H", help="the event-time window each asset event announces "
                        "(ISO 8601 duration dividing a day: PT15M, PT1H, P1D)")
    parser.add_argument("--watermark-delay", help="how late an event may come (ISO 8601 duration, default PT10M "
                        "with --output-asset): the query's event-time watermark on the events' ts")
    args = parser.parse_args(argv)
    if not args.output and not args.output_topic:
        parser.error("give the output: --output (a directory for Parquet files) or --output-topic (a Kafka topic)")
    if args.output and args.output_topic:
        parser.error("--output and --output-topic both name the output, and the events go to one of them: drop one "
                     "(--output for Parquet files, --output-topic for a Kafka topic, exactly once)")
    if args.skip_replays and not args.output_topic:
        parser.error("--skip-replays is the Kafka sink's: give --output-topic with it, or drop it")
    if args.output_topic and args.totals:
        parser.error("--totals writes Parquet files: drop --output-topic, or --totals")
    if args.watermark_delay is None and args.output_asset:
        args.watermark_delay = "PT10M"
    try:  # refused here, named by its flag, rather than by the runtime's field
        output_asset(args.output_asset, args.asset_every, uri_setting="--output-asset", every_setting="--asset-every")
        if args.watermark_delay:
            parse_duration(args.watermark_delay, "--watermark-delay")
    except InvalidInputError as exc:
        parser.error(str(exc))
    if args.source == SPARK_KAFKA_FORMAT and args.read_mode:
        parser.error("--read-mode is an option of the kafka_stream source; Spark's connector (--source kafka) always "
                     "reads on the executors: drop --read-mode")
    return args


def spark_session(cores: str):
    """The spark-submit session when launched by spark-submit, else a local one."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        spark = SparkSession.builder.appName("example_pipeline").getOrCreate()
        register(spark)
        return spark

    return local_session("example_pipeline", cores=cores)


def good_and_bad(runtime: StreamRuntime, dead_letters: Callable[[], DeadLetterSink],
                 write_good: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
    """A foreachBatch function: parse the batch's JSON once, ``write_good(good, batch_id)``, then send bad rows
    aside (to the sink ``dead_letters()`` gives when the batch runs)."""
    schema = event_schema()

    def write(batch_df, batch_id: int) -> None:
        parsed = parse_json_values(batch_df, schema, required=("id",)).persist()
        try:
            good, bad = split_dead_letters(parsed)
            write_good(good, batch_id)
            runtime.add_dead_letters(dead_letters().write(bad, batch_id))
        finally:
            parsed.unpersist()

    return write


def batch_writer(runtime: StreamRuntime, output: str, dead_letters: Callable[[], DeadLetterSink]):
    """The foreachBatch function: good rows and per-minute sums as Parquet, bad rows aside."""
    output = output_url(output, runtime)

    def write_good(good, batch_id: int) -> None:
        events = good.select("topic", "partition", "offset", F.col("timestamp").alias("kafka_timestamp"),
                             "parsed.id", "parsed.key", "parsed.ts", "parsed.amount")
        # Keyed by generation and batch: a new checkpoint generation restarts batch ids at 0 and must
        # not overwrite what an earlier generation wrote; a re-run batch overwrites its own output.
        key = f"generation={runtime.generation:04d}/batch={batch_id}"
        events.write.mode("overwrite").parquet(f"{output}/events/{key}")
        per_minute = (events.where(F.col("ts").isNotNull())
                      .groupBy("key", F.date_trunc("minute", "ts").alias("minute"))
                      .agg(F.sum("amount").alias("amount"), F.count(F.lit(1)).alias("events")))
        per_minute.write.mode("overwrite").parquet(f"{output}/per_key_minute/{key}")

    return good_and_bad(runtime, dead_letters, write_good)


STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


def key_totals(events, key_column: str = "key"):
    """The stateful part of ``--totals``: a running amount and count per key of the good events."""
    parsed = parse_json_values(events, event_schema(), required=("id",))
    good = parsed.where(F.col("dead_letter_error").isNull())
    return (good.groupBy(F.col(f"parsed.{key_column}").alias(key_column))
            .agg(F.sum("parsed.amount").alias("amount"), F.count(F.lit(1)).alias("events")))


def totals_writer(runtime: StreamRuntime, output: str):
    """The foreachBatch function of ``--totals``: the keys a batch updated, with their running totals."""
    output = output_url(output, runtime)

    def write(batch_df, batch_id: int) -> None:
        key = f"generation={runtime.generation:04d}/batch={batch_id}"
        batch_df.write.mode("overwrite").parquet(f"{output}/totals/{key}")

    return write


def with_event_time_watermark(events, delay: str):
    """The events with ``event_time`` (the value's ``ts``) and Spark's event-time watermark on it, ``delay``
    (an ISO 8601 duration) behind the newest event time seen; rows without a ``ts`` do not move it."""
    seconds = parse_duration(delay, "--watermark-delay").total_seconds()
    parsed = F.from_json(F.col("value").cast("string"), event_schema())
    return events.withColumn("event_time", parsed["ts"]).withWatermark("event_time", f"{seconds:g} seconds")


def topic_writer(runtime: StreamRuntime, topic: str, dead_letters: Callable[[], DeadLetterSink]):
    """The foreachBatch function of ``--output-topic``: each good event as JSON (with the topic, partition and
    offset it came from), keyed by its key, to ``topic`` in one Kafka transaction per batch; bad ones aside."""
    sink = attach_kafka_sink(runtime, topic)
    return good_and_bad(runtime, dead_letters, lambda good, batch_id: sink.write(kafka_records(good), batch_id))


def kafka_records(good):
    """The output records of good events: key and value (JSON of the event and where it was read); the input's
    topic, partition and offset beside them, which the sink keeps to itself (to skip replays)."""
    return good.select(F.col("parsed.key").alias("key"), F.to_json(F.struct(
        "topic", "partition", "offset", "parsed.id", "parsed.key", "parsed.ts", "parsed.amount")).alias("value"),
        "topic", "partition", "offset")


def output_url(output: str, runtime: StreamRuntime) -> str:
    """``output`` named for Spark's Hadoop file systems: file:// for a local path (not the cluster's default
    FS), s3a:// for s3://."""
    local = "://" not in output
    return spark_url(os.path.abspath(output) if local else output.rstrip("/"), runtime.config.storage_options)


def rehearsal_sink(runtime: StreamRuntime, totals: bool, topic: str | None = None):
    """The job's own batch function pointed at the rehearsal's scratch folder (dead letters too): a standby
    runs this version's whole code on real records before it may take over (docs/standby.md)."""

    def writer(df, scratch: str):
        if totals:
            return df.writeStream.foreachBatch(totals_writer(runtime, scratch))
        if topic:  # the output topic is never written by a rehearsal: its records go to the scratch folder
            return df.writeStream.foreachBatch(lambda batch, batch_id: kafka_records(split_dead_letters(
                parse_json_values(batch, event_schema(), required=("id",)))[0]).write.mode("overwrite").parquet(
                f"{scratch}/events/batch={batch_id}"))
        scratch_letters = lambda: DeadLetterSink.from_url(f"{scratch}/dead_letters", {})  # noqa: E731
        return df.writeStream.foreachBatch(batch_writer(runtime, scratch, scratch_letters))

    return writer


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    config = StreamConfig(
        job_name=args.job_name or args.home.rstrip("/").rsplit("/", 1)[-1],
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        topics=[t for spec in args.topic for t in spec.split(",") if t],
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        source_format=args.source,
        source_options={"readMode": args.read_mode or "auto"} if args.source == KAFKA_STREAM_FORMAT else {},
        heartbeat_seconds=args.heartbeat_seconds,
        clock_skew_seconds=args.clock_skew_seconds,
        drain_timeout_seconds=args.drain_timeout_seconds,
        # Settings a submit passed in the environment (secrets stay out of the process arguments).
        kafka_options={**client_config_from_env(),
                       **(read_properties(args.command_config) if args.command_config else {})},
        app_version=args.app_version,
        storage_options=storage_options_from_env(),
        sink_path=f"kafka://{args.bootstrap}/{args.output_topic}" if args.output_topic else args.output,
        # foreachBatch output replaced per generation and batch id (no _spark_metadata), or the transactional sink
        sink_kind="kafka" if args.output_topic else "idempotent",
        skip_replays=args.skip_replays,
        output_asset=args.output_asset,
        asset_every=args.asset_every,
    )
    spark = spark_session(args.cores)
    if args.totals:  # set before the query starts; a checkpoint keeps the values of its first batch
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", STATE_STORES[args.state_store])
        spark.conf.set("spark.sql.shuffle.partitions", str(args.state_partitions))
    # The with block turns an error while the query is built (after read_stream started the heartbeat)
    # into a FAILED status instead of a STARTING heartbeat that makes the job look alive.
    with StreamRuntime(spark, args.home, config) as runtime:
        events = runtime.read_stream()
        if args.watermark_delay:
            events = with_event_time_watermark(events, args.watermark_delay)
        # The generation is known once the query runs (a standby builds its query before its go).
        dead_letters = lambda: DeadLetterSink.from_url(  # noqa: E731
            args.dead_letter or f"{runtime.home.url}/dead_letters/generation={runtime.generation:04d}",
            config.client_config())
        if args.totals:
            query = key_totals(events)
            write = totals_writer(runtime, args.output)
            writer = query.writeStream.outputMode("update").foreachBatch(runtime.foreach_batch(write))
        elif args.output_topic:
            writer = events.writeStream.foreachBatch(runtime.foreach_batch(topic_writer(
                runtime, args.output_topic, dead_letters)))
        else:
            write = batch_writer(runtime, args.output, dead_letters)
            writer = events.writeStream.foreachBatch(runtime.foreach_batch(write))
        writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(
            processingTime=args.trigger_interval)
        result = runtime.run(writer, query_name=config.job_name, rehearsal_sink=rehearsal_sink(runtime, args.totals,
                                                                                           args.output_topic))
    print(f"example_pipeline {result.summary()}", flush=True)
    spark.stop()
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
