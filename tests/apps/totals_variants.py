"""Versions 2 of the example pipeline's stateful ``--totals`` job, each changed the way an upgrade can break it.

Each takes the example pipeline's arguments (a test launches it where the example pipeline would run):

* ``key-long``: the aggregation's key becomes a number (the state's key schema no longer fits);
* ``extra-operator``: a deduplication before the aggregation (one more stateful operator);
* ``poison``: a function that raises on a record whose amount is -1 (present in the backlog);
* ``bad-sink``: writes to a sink format that is not installed.
"""

from __future__ import annotations

import sys

from airflow_kafka_stream.jobs.example_pipeline import (
    STATE_STORES,
    event_schema,
    parse_args,
    spark_session,
    totals_writer,
)
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime, client_config_from_env
from airflow_kafka_stream.runtime.dead_letter import parse_json_values


def query(events, variant: str):
    from pyspark.sql import functions as F

    good = parse_json_values(events, event_schema(), required=("id",)).where(F.col("dead_letter_error").isNull())
    key = F.col("parsed.key").alias("key")
    if variant == "key-long":
        key = F.length(F.col("parsed.key")).cast("bigint").alias("key")
    if variant == "extra-operator":
        good = good.dropDuplicates(["parsed"])
    amount = F.col("parsed.amount")
    if variant == "poison":
        def checked(value):
            if value == -1:
                raise ValueError(f"amount {value} is not a valid amount")
            return value

        amount = F.udf(checked, "double")(amount)
    return good.withColumn("amount", amount).groupBy(key).agg(F.sum("amount").alias("amount"),
                                                             F.count(F.lit(1)).alias("events"))


def main(variant: str, argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = StreamConfig(job_name=args.home.rstrip("/").rsplit("/", 1)[-1], bootstrap_servers=args.bootstrap,
                          group_id=args.group, topics=list(args.topic), kafka_options=client_config_from_env(),
                          app_version=args.app_version, sink_kind="idempotent", sink_path=args.output,
                          source_format=args.source,
                          heartbeat_seconds=args.heartbeat_seconds)
    spark = spark_session(args.cores)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", STATE_STORES[args.state_store])
    spark.conf.set("spark.sql.shuffle.partitions", str(args.state_partitions))
    with StreamRuntime(spark, args.home, config) as runtime:
        writer = query(runtime.read_stream(), variant).writeStream.outputMode("update")
        writer = (writer.format("nosuchformat").option("path", args.output) if variant == "bad-sink"
                  else writer.foreachBatch(totals_writer(runtime, args.output)))
        result = runtime.run(writer.trigger(processingTime=args.trigger_interval), query_name=config.job_name)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
