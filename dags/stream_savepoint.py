"""Hourly savepoints of the running job: restore points for a bad deploy found hours later (Flink's periodic
savepoints). Live while the job runs, so the job is neither stopped nor slowed; stream_savepoint_housekeeping
prunes them (it keeps the newest 24, a day of these). Trigger it by hand for a restore point now (the job page
links here)."""

from datetime import datetime

from airflow.sdk import DAG, Param

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.savepoints import StreamSavepointOperator

with DAG(
    dag_id="stream_savepoint",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow-kafka-stream"],
    params={
        "job_home": params.job_home(),
        "app_version": Param("", type="string", title="Application version in the manifest",
                             description="empty: the running job's version"),
    },
) as dag:
    StreamSavepointOperator(task_id="savepoint", job_home="{{ params.job_home }}",
                            app_version="{{ params.app_version }}")
