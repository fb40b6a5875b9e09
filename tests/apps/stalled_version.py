"""A version that starts and consumes nothing: RUNNING, heart-beating, but its first batch never finishes.

Its batch function hangs, which an upgrade's rehearsal does not see (it writes to Spark's noop sink and runs
no foreachBatch body), so the version passes the rehearsal and fails the health gate after it took over. A
hang in the query itself (a function in a select) is caught by the rehearsal before the stop instead.

Takes the example pipeline's arguments, so a test submits it where the example pipeline would run.
"""

from __future__ import annotations

import sys
import time

from airflow_kafka_stream.jobs.example_pipeline import parse_args, spark_session
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime, client_config_from_env


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = StreamConfig(job_name=args.home.rstrip("/").rsplit("/", 1)[-1], bootstrap_servers=args.bootstrap,
                          group_id=args.group, topics=list(args.topic), kafka_options=client_config_from_env(),
                          app_version=args.app_version, sink_kind="idempotent", sink_path=args.output,
                          heartbeat_seconds=args.heartbeat_seconds)
    spark = spark_session(args.cores)
    def hang(batch_df, batch_id: int) -> None:  # the body of a foreachBatch function: a rehearsal (noop sink)
        time.sleep(3600)                        # does not run it, so this version passes it and stalls after the go

    with StreamRuntime(spark, args.home, config) as runtime:
        writer = runtime.read_stream().writeStream.foreachBatch(hang)
        result = runtime.run(writer, query_name=config.job_name)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
