"""Submit the streaming job: a detached driver, then wait (deferred) until it has committed batches."""

from airflow.sdk import DAG, Param

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.submit import StreamSubmitOperator

with DAG(
    dag_id="stream_submit",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["airflow-kafka-stream"],
    params={
        "job_home": params.job_home(),
        "app_version": Param(params._env("STREAM_APP_VERSION", "1"), type="string", minLength=1,
                             title="Application version"),
        **params.pipeline(),
        **params.source("kafka_stream"),
        **params.output_asset(),
        "starting_offsets": Param("earliest", enum=["earliest", "latest", "group"], title="Start of a fresh job",
                                  description="Used only when the job has no checkpoint yet"),
        "min_batches": Param(1, type="integer", minimum=0, title="Batches before success",
                             description="0 for a topic that may be idle: success once the job runs"),
        "hot_standby": Param(False, type="boolean", title="Hot standby",
                             description="Keep a second driver of this version ready beside the job: it takes the "
                                         "job over within seconds when the driver dies (costs an idle driver)"),
    },
) as dag:
    StreamSubmitOperator(
        task_id="submit",
        job_home="{{ params.job_home }}",
        app_version="{{ params.app_version }}",
        topics="{{ params.topics }}",
        group="{{ params.group }}",
        output_path="{{ params.output_path }}",
        starting_offsets="{{ params.starting_offsets }}",
        source="{{ params.source }}",
        min_batches="{{ params.min_batches }}",
        hot_standby="{{ params.hot_standby }}",
        output_asset="{{ params.output_asset or '' }}",
        asset_every="{{ params.asset_every if params.output_asset else '' }}",
        watermark_delay="{{ params.watermark_delay if params.output_asset else '' }}",
        deferrable=True,
    )
