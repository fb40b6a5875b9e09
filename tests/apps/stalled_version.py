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
    from pyspark.sql import functions as F

    stall = F.udf(lambda value: time.sleep(3600) or value, "binary")

    def hang(batch_df, batch_id: int) -> None:
        # A Spark job whose tasks never end, run from the batch function: a rehearsal (noop sink) does not run the
        # function, so this version passes it and stalls after the go; a stop in kill mode cancels the tasks.
        batch_df.select(stall("value").alias("value")).write.format("noop").mode("overwrite").save()

    with StreamRuntime(spark, args.home, config) as runtime:
        writer = runtime.read_stream().writeStream.foreachBatch(hang)
        result = runtime.run(writer, query_name=config.job_name)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
