"""Restore the stopped job from a savepoint, then start it again (the job page's "Restore" action).

The restore starts a new checkpoint generation from the savepoint (with ``drop_state``, from its offsets alone);
it is refused while the job runs, so stop it first (stream_stop). With ``start`` the job is then started exactly
as that version was last submitted to this job home (application, arguments, Spark settings): the savepoint's own
version unless ``start_version`` names another.
"""

from airflow.sdk import DAG, Param

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.savepoints import StreamRestoreOperator
from airflow_kafka_stream.operators.submit import StreamSubmitOperator

with DAG(
    dag_id="stream_restore",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["airflow-kafka-stream"],
    params={
        "job_home": params.job_home(),
        "savepoint_id": Param("latest", type="string", minLength=1, title="Savepoint",
                              description="A savepoint id (airflow-kafka-stream savepoint list), or latest"),
        "drop_state": Param(False, type="boolean", title="Drop operator state",
                            description="Start from the savepoint's offsets alone, for a query whose state changed"),
        "start": Param(True, type="boolean", title="Start the job afterwards"),
        "start_version": Param("", type="string", title="Version to start",
                               description="Empty: the version the savepoint was taken of"),
    },
) as dag:

    restore = StreamRestoreOperator(task_id="restore", job_home="{{ params.job_home }}",
                                    savepoint_id="{{ params.savepoint_id }}", drop_state="{{ params.drop_state }}")
    start = StreamSubmitOperator(
        task_id="start", job_home="{{ params.job_home }}", from_submission=True, deferrable=True,
        enabled="{{ params.start }}",
        app_version="{{ params.start_version or ti.xcom_pull(task_ids='restore')['savepoint']['app_version'] }}")
    restore >> start
