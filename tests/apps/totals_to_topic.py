"""A job of a user's own, not the example pipeline: running totals per key over several topics (a stateful
aggregation in update mode), written to a Kafka topic through the runtime's transactional sink.

It takes the example pipeline's arguments (``--topic`` repeated, ``--output-topic``). Each batch writes one record
per key it changed: the key's count of events and sum of amounts so far, so a key's records in the output count
up, and one written twice would show.
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from airflow_kafka_stream.jobs.example_pipeline import STATE_STORES, event_schema, parse_args, spark_session
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime, client_config_from_env
from airflow_kafka_stream.runtime.dead_letter import parse_json_values


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = StreamConfig(job_name=args.home.rstrip("/").rsplit("/", 1)[-1], bootstrap_servers=args.bootstrap,
                          group_id=args.group, topics=list(args.topic), kafka_options=client_config_from_env(),
                          app_version=args.app_version, sink_kind="kafka",
                          sink_path=f"kafka://{args.bootstrap}/{args.output_topic}",
                          max_offsets_per_trigger=args.max_offsets_per_trigger,
                          heartbeat_seconds=args.heartbeat_seconds)
    spark = spark_session(args.cores)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", STATE_STORES[args.state_store])
    spark.conf.set("spark.sql.shuffle.partitions", str(args.state_partitions))
    with StreamRuntime(spark, args.home, config) as runtime:
        good = parse_json_values(runtime.read_stream(), event_schema(), required=("id",))
        totals = (good.where(F.col("dead_letter_error").isNull())
                  .groupBy(F.col("parsed.key").alias("key"))
                  .agg(F.count(F.lit(1)).alias("events"), F.sum("parsed.amount").alias("amount")))
        out = totals.select("key", F.to_json(F.struct("key", "events", "amount")).alias("value"))
        writer = out.writeStream.outputMode("update").foreachBatch(runtime.kafka_sink(args.output_topic))
        result = runtime.run(writer.trigger(processingTime=args.trigger_interval), query_name=config.job_name)
    spark.stop()
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
