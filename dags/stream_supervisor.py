"""Supervise the streaming job from the triggerer: a crash is restarted within seconds, with no worker slot held.

Trigger it once after the job is submitted (it runs while the job runs; a stop ends it). The scheduled
``stream_watchdog`` stays the safety net: it restarts a stuck job and a job whose supervisor is not running.
"""

import os

from airflow.sdk import DAG

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.supervisor import StreamSupervisorOperator

with DAG(
    dag_id="stream_supervisor",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    tags=["airflow-kafka-stream"],
    params={"job_home": params.job_home()},
) as dag:
    # The same limits as stream_watchdog by default: both count the same restarts in the job's history.
    StreamSupervisorOperator(task_id="supervise", job_home="{{ params.job_home }}",
                             max_restarts=int(os.environ.get("STREAM_SUPERVISOR_MAX_RESTARTS") or 3),
                             window_seconds=3600, backoff_seconds=60, poll_seconds=1)
