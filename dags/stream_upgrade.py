"""Upgrade the streaming job: stop with a savepoint, start the new version, gate on its health, roll back.

By default the new version first comes up as a warm standby beside the running one and takes over once the
old version stopped with its savepoint, so the downtime holds no driver start; ``standby`` off is the cold path.

``check_only`` runs only ``check_upgrade``: the new version rehearses its query on a copy of the job's state and
reports whether the upgrade as asked would go on (its verdict in XCom; the task fails when it would not); the job
is not touched and the upgrade's tasks are skipped. Off (the default), the check skips itself and the upgrade runs.

Trigger it from the UI (the form validates every field) or the REST API with ``conf``. Each step is its own
task in the grid: a person sees where an upgrade stands and can clear one step to retry it.
"""

from airflow.sdk import DAG, Param

from airflow_kafka_stream import params
from airflow_kafka_stream.operators.upgrade import stream_upgrade_task_group
from airflow_kafka_stream.operators.upgrade_check import StreamUpgradeCheckOperator, UpgradeUnlessCheckOnlyOperator

with DAG(
    dag_id="stream_upgrade",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["airflow-kafka-stream"],
    params={
        "job_home": params.job_home(),
        "new_version": Param(type="string", minLength=1, title="New application version"),
        "application": Param(None, type=["null", "string"], title="Application file",
                             description="The new version's PySpark file (empty: the package's example pipeline)"),
        "application_args": Param([], type="array", items={"type": "string"}, title="Application arguments"),
        **params.pipeline(keep_running=True),
        **params.source(None),
        "drop_state": Param(False, type="boolean", title="Drop operator state",
                            description="Start a fresh checkpoint at the savepoint's offsets (incompatible query)"),
        "health_batches": Param(3, type="integer", minimum=1, title="Batches the new version must commit"),
        "health_window_seconds": Param(60, type="integer", minimum=0, title="Seconds its lag must not grow"),
        "health_startup_seconds": Param(300, type="integer", minimum=0,
                                        title="Seconds its first batch may take before it counts as stalled"),
        "rollback": Param(True, type="boolean", title="Roll back on failure"),
        "standby": Param(True, type="boolean", title="Warm standby",
                         description="Start the new version beside the running one and hand over to it once the "
                                     "old one stopped (short downtime); off: stop, then start it cold"),
        "takeover_stopped": Param(False, type="boolean", title="Standby may take over a stopped job",
                                  description="Let the standby take over even when the old version was not running "
                                              "when the upgrade stopped it (it crashed or was stopped by someone)"),
        "stop_timeout_seconds": Param(300, type="integer", minimum=1, title="Seconds to finish a batch and stop"),
        "health_timeout_seconds": Param(900, type="integer", minimum=1, title="Seconds the health gate may take"),
        "check_only": Param(False, type="boolean", title="Only check, do not upgrade",
                            description="Rehearse the new version on a copy of the job's state and report whether "
                                        "this upgrade would go on (compatible, needs drop_state, fails); the job "
                                        "is not touched and nothing else runs"),
    },
) as dag:
    version = {  # the new version and how it starts: the same for the check and the upgrade
        "job_home": "{{ params.job_home }}",
        "application": "{{ params.application }}",
        "application_args": "{{ params.application_args }}",
        "topics": "{{ params.topics }}",
        "group": "{{ params.group }}",
        "output_path": "{{ params.output_path }}",
        "drop_state": "{{ params.drop_state }}",
        "source": "{{ params.source }}",
    }
    StreamUpgradeCheckOperator(task_id="check_upgrade", enabled="{{ params.check_only }}",
                               app_version="{{ params.new_version }}", **version)
    # A short circuit, not a branch: it skips every task of the group whatever its trigger rule (the stop and
    # the outcome run after skipped tasks by design, so a branch would not hold them), and a check-only run
    # leaves the job alone.
    upgrade = UpgradeUnlessCheckOnlyOperator(task_id="upgrade_unless_check_only", job_home="{{ params.job_home }}",
                                             check_only="{{ params.check_only }}")
    upgrade >> stream_upgrade_task_group(
        new_version="{{ params.new_version }}",
        **version,
        health_batches="{{ params.health_batches }}",
        health_window_seconds="{{ params.health_window_seconds }}",
        health_startup_seconds="{{ params.health_startup_seconds }}",
        rollback="{{ params.rollback }}",
        standby="{{ params.standby }}",
        takeover_stopped="{{ params.takeover_stopped }}",
        stop_timeout_seconds="{{ params.stop_timeout_seconds }}",
        health_timeout_seconds="{{ params.health_timeout_seconds }}",
        # An upgrade's waits (a drain, a standby, a health window) last minutes: hold no worker slot for them.
        deferrable=True,
    )
