"""Reset the streaming job's offsets, checkpoint and consumer group together: a dry run unless told to execute.

Trigger it by hand with the form, or give it a schedule for a planned reset. Refused while the job runs.
"""

from airflow.sdk import DAG, Param

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.reset import StreamResetOperator

with DAG(
    dag_id="stream_offset_reset",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["airflow-kafka-stream"],
    params={
        "job_home": params.job_home(),
        "strategy": Param("to-current", enum=params.STRATEGIES, title="Strategy",
                          description="As kafka-consumer-groups.sh --reset-offsets, plus to-savepoint"),
        "datetime": Param(None, type=["null", "string"], format="date-time", title="Date-time (to-datetime)",
                          description="A time zone is required: 2026-11-22T08:00:00Z or 2026-11-22T09:00:00+01:00 "
                                      "(without one, Airflow refuses it as \"is not a 'date-time'\")"),
        "value": Param(None, type=["null", "string"], title="Value (other strategies)",
                       description="to-offset: 42 or t:0=42,t:1=40; shift-by: -100; by-duration: PT1H; "
                                   "from-file: a CSV path; to-savepoint: a savepoint id"),
        "topics": Param([], type="array", items={"type": "string", "minLength": 1}, title="Scope",
                        description="topic or topic:0,1 items; empty: all the job's topics"),
        "execute": Param(False, type="boolean", title="Execute", description="Off: a dry run that changes nothing"),
        "drop_state": Param(False, type="boolean", title="Drop operator state"),
    },
) as dag:
    StreamResetOperator(
        task_id="reset",
        job_home="{{ params.job_home }}",
        strategy="{{ params.strategy }}",
        value="{{ params.datetime if params.strategy == 'to-datetime' else params.value }}",
        topics="{{ params.topics }}",
        execute="{{ params.execute }}",
        drop_state="{{ params.drop_state }}",
    )
