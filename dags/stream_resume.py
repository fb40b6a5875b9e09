"""Start the job again exactly as a version was last submitted to its job home (the job page's "Retry" action).

For a job that recovery gave up on (state GAVE_UP), or one stopped on purpose: the driver resumes from its
checkpoint, with the application, arguments and Spark settings recorded at that version's last submit. Being
deliberate, it starts the restart budget of the watchdog, the supervisor and a hot standby afresh.
"""

from airflow.sdk import DAG, Param

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.submit import StreamSubmitOperator

with DAG(
    dag_id="stream_resume",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["airflow-kafka-stream"],
    params={
        "job_home": params.job_home(),
        "app_version": Param("", type="string", title="Version",
                             description="Empty: the version the job ran last (job.json)"),
    },
) as dag:
    StreamSubmitOperator(
        task_id="resume", job_home="{{ params.job_home }}", from_submission=True, deferrable=True,
        app_version="{{ params.app_version }}")
