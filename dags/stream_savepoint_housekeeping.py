"""Daily savepoint housekeeping: keep the newest ten and a day's worth, never the newest or a pinned one."""

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
    StreamSavepointHousekeepingOperator(task_id="prune", job_home="{{ params.job_home }}", keep_last=10,
                                        max_age="P1D")
