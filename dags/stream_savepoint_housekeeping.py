"""Daily savepoint housekeeping: keep the newest 24 and a day's worth, never the newest or a pinned one."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.savepoints import StreamSavepointHousekeepingOperator

with DAG(
    dag_id="stream_savepoint_housekeeping",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-kafka-stream"],
    params={"job_home": params.job_home()},
) as dag:
    # A savepoint goes once it is past either limit. stream_savepoint takes one an hour, so 24 and one day keep
    # a day of hourly restore points (with the savepoints of stops and upgrades among them) and bound the space:
    # each savepoint is a full copy of the job's state. The newest, and any an upgrade may roll back to, stay.
    StreamSavepointHousekeepingOperator(task_id="prune", job_home="{{ params.job_home }}", keep_last=24,
                                        max_age="P1D")
