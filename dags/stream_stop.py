"""Stop the streaming job after its running batch and take a savepoint (deferred while it drains)."""

from airflow.sdk import DAG, Param

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.stop import StreamStopOperator

with DAG(
    dag_id="stream_stop",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["airflow-kafka-stream"],
    params={
        "job_home": params.job_home(),
        "savepoint": Param(True, type="boolean", title="Take a savepoint"),
        "timeout_seconds": Param(300, type="integer", minimum=1, title="Seconds to finish the running batch"),
        "on_timeout": Param("withdraw", enum=["withdraw", "kill"], title="If it does not stop in time",
                            description="withdraw: the job keeps running; kill: cancel the batch and stop for good"),
    },
) as dag:
    StreamStopOperator(
        task_id="stop",
        job_home="{{ params.job_home }}",
        savepoint="{{ params.savepoint }}",
        timeout_seconds="{{ params.timeout_seconds }}",
        on_timeout="{{ params.on_timeout }}",
        deferrable=True,
    )
