"""Verify the streaming job every few minutes: group offsets against the checkpoint, per partition."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.verify import StreamVerifyOperator

with DAG(
    dag_id="stream_verify",
    schedule="*/5 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow-kafka-stream"],
    params={"job_home": params.job_home()},
) as dag:
    StreamVerifyOperator(task_id="verify", job_home="{{ params.job_home }}")
