"""Upgrade a streaming job with a health gate and a rollback, one task per step (a task group factory).

observe → decide → act, with every step visible in the grid and retryable:

1. ``stop_with_savepoint``: the old version finishes its batch and stops; the savepoint is pinned (kept
   out of housekeeping) because a rollback needs it. If this fails, nothing changed: the old version keeps
   running and no rollback runs.
2. ``restore_without_state`` (only with ``drop_state``): a new checkpoint generation seeded at the
   savepoint's offsets, for a query that changed incompatibly.
3. ``submit_new_version``: the new version starts (from the current checkpoint, or the seeded generation)
   and reports RUNNING; whether it consumes is the health gate's to judge.
4. ``health_gate``: it must run, commit ``health_batches`` batches and not fall behind for
   ``health_window_seconds`` (a version that runs but consumes nothing fails here).
5. On a failure of 3 or 4, the rollback: ``rollback_stop_new_version`` (stopped at once if need be),
   ``rollback_restore_savepoint`` (a new generation copied from the pre-upgrade savepoint, state included),
   ``rollback_submit_previous_version`` (exactly as it was submitted before).
6. ``outcome``: succeeds when the new version is healthy; otherwise fails saying where the upgrade failed
   and whether the previous version runs again. The savepoint is unpinned once the upgrade is decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context, TaskGroup, TriggerRule

from airflow_kafka_stream.errors import JobStateError, OperationIncompleteError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.operators.flags import as_flag
from airflow_kafka_stream.operators.savepoints import StreamRestoreOperator
from airflow_kafka_stream.operators.stop import StreamStopOperator
from airflow_kafka_stream.operators.submit import StreamSubmitOperator
from airflow_kafka_stream.sensors.health import StreamJobHealthSensor

STOP, RESTORE, SUBMIT, HEALTH = "stop_with_savepoint", "restore_without_state", "submit_new_version", "health_gate"
ROLLBACK_STOP, ROLLBACK_RESTORE, ROLLBACK_SUBMIT = ("rollback_stop_new_version", "rollback_restore_savepoint",
                                                    "rollback_submit_previous_version")


class RollbackStopOperator(StreamStopOperator):
    """Stop the new version for a rollback; skipped when rollback is off, or when the upgrade failed before
    the old version stopped (nothing changed then)."""

    template_fields: Sequence[str] = (*StreamStopOperator.template_fields, "enabled")

    def __init__(self, *, stop_task_id: str, enabled: bool | str = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stop_task_id = stop_task_id
        self.enabled = enabled

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        if not as_flag(self.enabled, "rollback"):
            raise AirflowSkipException("rollback is off for this upgrade")
        stopped = context["ti"].xcom_pull(task_ids=self.stop_task_id)
        if not stopped or not (stopped.get("savepoint") or {}).get("id"):
            raise AirflowSkipException("the upgrade failed before the old version stopped with a savepoint: "
                                       "nothing changed, nothing to roll back")
        return super().execute(context)


class UpgradeOutcomeOperator(BaseOperator):
    """Decide the upgrade: success when the new version is healthy, else a failure that says what happened."""

    template_fields: Sequence[str] = ("job_home", "new_version", "rollback")

    def __init__(self, *, job_home: str, new_version: str, group_id: str, storage_conn_id: str | None = None,
                 rollback: bool | str = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rollback = rollback
        self.job_home = job_home
        self.new_version = new_version
        self.group_id = group_id
        self.storage_conn_id = storage_conn_id

    def _pull(self, context: Context, task: str) -> Any:
        return context["ti"].xcom_pull(task_ids=f"{self.group_id}.{task}")

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.ops.savepoints import unpin

        stopped = self._pull(context, STOP) or {}
        savepoint = (stopped.get("savepoint") or {}).get("id")
        healthy = self._pull(context, HEALTH)
        rolled_back = self._pull(context, ROLLBACK_SUBMIT)
        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        if savepoint is None:
            raise JobStateError(f"upgrade of {self.job_home} to version {self.new_version} failed before any "
                                "downtime: the old version did not stop with a savepoint and keeps running "
                                "(see the stop_with_savepoint task)")
        if healthy:
            unpin(home, savepoint)
            self.log.info("upgrade of %s to version %s succeeded: %s", self.job_home, self.new_version,
                          healthy.get("message"))
            return {"upgraded": True, "version": self.new_version, "savepoint": savepoint,
                    "health": healthy.get("message")}
        if rolled_back:
            unpin(home, savepoint)
            raise JobStateError(
                f"upgrade of {self.job_home} to version {self.new_version} failed its start or health gate and "
                f"was rolled back: version {stopped.get('app_version')} runs again from savepoint {savepoint} "
                f"(generation {rolled_back.get('generation')}); see the submit_new_version and health_gate tasks")
        if not as_flag(self.rollback, "rollback"):
            raise JobStateError(
                f"upgrade of {self.job_home} to version {self.new_version} failed its start or health gate; rollback "
                f"is off, so the new version is left as it is. Savepoint {savepoint} (kept pinned) holds the "
                f"previous version {stopped.get('app_version')}'s position: restore it and submit that version to "
                "roll back by hand")
        raise OperationIncompleteError(
            f"upgrade of {self.job_home} to version {self.new_version} failed and the rollback did not complete: "
            f"savepoint {savepoint} (kept pinned) holds the previous version's position. Fix the failing rollback "
            "task and clear it to retry, or restore that savepoint and submit the previous version by hand")


def stream_upgrade_task_group(
    *,
    job_home: str,
    new_version: str,
    group_id: str = "upgrade",
    application: str | None = None,
    application_args: Sequence[str] | None = None,
    topics: Sequence[str] | None = None,
    group: str | None = None,
    output_path: str | None = None,
    drop_state: bool | str = False,
    allow_sink_batch_log: bool = False,
    health_batches: int = 3,
    health_window_seconds: float = 60.0,
    rollback: bool | str = True,
    spark_conn_id: str = "spark_default",
    kafka_conn_id: str = "kafka_default",
    storage_conn_id: str | None = None,
    spark_conf: dict[str, Any] | None = None,
    stop_timeout_seconds: float | str = 300.0,
    start_timeout_seconds: float = 600.0,
    health_timeout_seconds: float | str = 900.0,
    poll_seconds: float = 5.0,
    deferrable: bool = True,
) -> TaskGroup:
    """The upgrade's tasks in a task group (see the module docstring); call it inside a DAG.

    ``drop_state`` and ``rollback`` may be templates (e.g. ``"{{ params.drop_state }}"``): the tasks they
    switch are then always in the group and skip themselves when off.
    """
    common = {"job_home": job_home, "storage_conn_id": storage_conn_id}
    with TaskGroup(group_id=group_id, tooltip=f"upgrade {job_home} to version {new_version}") as tasks:
        stop = StreamStopOperator(task_id=STOP, savepoint=True, timeout_seconds=stop_timeout_seconds,
                                  poll_seconds=poll_seconds, deferrable=deferrable,
                                  pin_reason=f"upgrade to version {new_version} may roll back to it", **common)
        savepoint = f"{{{{ ti.xcom_pull(task_ids='{group_id}.{STOP}')['savepoint']['id'] }}}}"
        submit = StreamSubmitOperator(
            task_id=SUBMIT, app_version=new_version, application=application, application_args=application_args,
            topics=topics, group=group, output_path=output_path, spark_conn_id=spark_conn_id,
            kafka_conn_id=kafka_conn_id, spark_conf=spark_conf, min_batches=0, timeout_seconds=start_timeout_seconds,
            poll_seconds=poll_seconds, deferrable=deferrable, trigger_rule=TriggerRule.NONE_FAILED, **common)
        if drop_state is False:
            stop >> submit
        else:
            stop >> StreamRestoreOperator(task_id=RESTORE, savepoint_id=savepoint, drop_state=True, enabled=drop_state,
                                          allow_sink_batch_log=allow_sink_batch_log, **common) >> submit
        health = StreamJobHealthSensor(
            task_id=HEALTH, kafka_conn_id=kafka_conn_id, min_batches=health_batches,
            window_seconds=health_window_seconds,
            newer_than=f"{{{{ ti.xcom_pull(task_ids='{group_id}.{SUBMIT}', key='submit')['submitted_at'] }}}}",
            poke_interval=poll_seconds, timeout_seconds=health_timeout_seconds, deferrable=deferrable, mode="poke", **common)
        submit >> health
        outcome = UpgradeOutcomeOperator(task_id="outcome", new_version=new_version, group_id=group_id,
                                         rollback=rollback, trigger_rule=TriggerRule.ALL_DONE, **common)
        health >> outcome
        if rollback is not False:
            stop_new = RollbackStopOperator(
                task_id=ROLLBACK_STOP, stop_task_id=f"{group_id}.{STOP}", enabled=rollback, savepoint=False,
                on_timeout="kill",
                timeout_seconds=stop_timeout_seconds, poll_seconds=poll_seconds, deferrable=deferrable,
                trigger_rule=TriggerRule.ONE_FAILED, **common)
            restore_previous = StreamRestoreOperator(task_id=ROLLBACK_RESTORE, savepoint_id=savepoint,
                                                     allow_sink_batch_log=allow_sink_batch_log, **common)
            submit_previous = StreamSubmitOperator(
                task_id=ROLLBACK_SUBMIT, from_submission=True,
                app_version=f"{{{{ ti.xcom_pull(task_ids='{group_id}.{STOP}')['app_version'] }}}}",
                spark_conn_id=spark_conn_id, kafka_conn_id=kafka_conn_id, min_batches=1,
                timeout_seconds=start_timeout_seconds, poll_seconds=poll_seconds, deferrable=deferrable, **common)
            [submit, health] >> stop_new >> restore_previous >> submit_previous >> outcome
    return tasks
