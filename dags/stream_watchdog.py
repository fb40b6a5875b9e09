"""Keep the streaming job running: every few minutes, restart it if it died or got stuck, within limits."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.watchdog import StreamWatchdogOperator

with DAG(
    dag_id="stream_watchdog",
    schedule="*/5 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow-kafka-stream"],
    params={"job_home": params.job_home(), **params.lag_objective()},
) as dag:
    # After its pass the watchdog checks the lag objective once (off while both objective Params are empty and
    # no objective sensor recorded one): a breach fails the task with the partitions, their lag and trend.
    StreamWatchdogOperator(task_id="watchdog", job_home="{{ params.job_home }}", stuck_after_seconds=600,
                           max_restarts=3, window_seconds=3600, backoff_seconds=60,
                           max_lag_seconds="{{ params.max_lag_seconds }}",
                           for_seconds="{{ params.max_lag_for_seconds }}")
