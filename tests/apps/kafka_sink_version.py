"""A job that writes each batch to a Kafka topic with Spark's own Kafka sink (``write.format("kafka")``).

Takes the example pipeline's arguments; ``--output`` names the output topic. Spark's connector is on the driver's
class path only if the launch put it there (``kafka_connector``): without it every batch fails.
"""

from __future__ import annotations

import sys

from airflow_kafka_stream.jobs.example_pipeline import parse_args, spark_session
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime, client_config_from_env


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    config = StreamConfig(job_name=args.home.rstrip("/").rsplit("/", 1)[-1], bootstrap_servers=args.bootstrap,
                          group_id=args.group, topics=list(args.topic), kafka_options=client_config_from_env(),
                          app_version=args.app_version, sink_kind="idempotent",
                          heartbeat_seconds=args.heartbeat_seconds)
    spark = spark_session(args.cores)

    def write(batch_df, batch_id: int) -> None:
        (batch_df.selectExpr("key", "value").write.format("kafka")
         .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output).save())

    with StreamRuntime(spark, args.home, config) as runtime:
        writer = runtime.read_stream().writeStream.foreachBatch(write).trigger(processingTime=args.trigger_interval)
        result = runtime.run(writer, query_name=config.job_name)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
