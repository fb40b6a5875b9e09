"""Start a detached Spark driver with the Spark provider's SparkSubmitHook building its command.

``SparkSubmitHook.submit`` waits for spark-submit to end, which for a Python
driver in client mode is the end of the stream: days of a held worker slot.
The command it builds is used here instead, started in its own session (so
the end of the task does not end it) with its output in a log file. The Kafka
settings, secrets included, travel in the environment, not the arguments.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.ops.submit import CLIENT_CONFIG_ENV, LaunchedDriver

EXAMPLE_PIPELINE = str(Path(__file__).resolve().parents[1] / "jobs" / "example_pipeline.py")


def launch_driver(*, spark_conn_id: str, application: str | None, args: Sequence[str],
                  spark_conf: Mapping[str, Any], kafka: Mapping[str, Any], log_path: str, name: str) -> LaunchedDriver:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import BaseHook

    try:
        BaseHook.get_connection(spark_conn_id)  # SparkSubmitHook falls back to master 'yarn' without a word
    except Exception as exc:  # noqa: BLE001 - Airflow raises its own not-found error types
        raise InvalidInputError(f"Spark connection {spark_conn_id!r} is not defined ({exc}); create a connection of "
                                "type spark whose host is the master (local[2], spark://host:7077, yarn, k8s://...)"
                                ) from None
    spark = SparkSubmitHook(conf=dict(spark_conf), conn_id=spark_conn_id, application_args=list(args), name=name)
    command = spark._build_spark_submit_command(application or EXAMPLE_PIPELINE)
    env = {**os.environ, **(spark._env or {}), CLIENT_CONFIG_ENV: json.dumps(dict(kafka))}
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True, close_fds=True)
    return LaunchedDriver(process.pid, socket.gethostname(), log_path)
