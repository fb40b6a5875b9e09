"""A version that fails every batch (a record it cannot handle): the crash loop a watchdog must give up on.

Takes the example pipeline's arguments, so a test submits it where the example pipeline would run.
"""

from __future__ import annotations

import sys

from airflow_kafka_stream.jobs.example_pipeline import parse_args, spark_session
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime, client_config_from_env


def fail(batch_df, batch_id: int) -> None:
    raise ValueError(f"poison record in batch {batch_id}: this version cannot parse it")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = StreamConfig(job_name=args.home.rstrip("/").rsplit("/", 1)[-1], bootstrap_servers=args.bootstrap,
                          group_id=args.group, topics=list(args.topic), kafka_options=client_config_from_env(),
                          app_version=args.app_version, sink_kind="idempotent", sink_path=args.output,
                          heartbeat_seconds=args.heartbeat_seconds)
    spark = spark_session(args.cores)
    with StreamRuntime(spark, args.home, config) as runtime:
        result = runtime.run(runtime.read_stream().writeStream.foreachBatch(fail), query_name=config.job_name)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
