"""Upgrade a streaming job with a health gate and a rollback, one task per step (a task group factory).

observe → decide → act, with every step visible in the grid and retryable:

0. ``start_standby`` (with ``standby``, the default): the new version's driver comes up beside the running
   one as a warm standby and reports ready. If it does not, it is ended and nothing else runs: the upgrade
   fails before any downtime. Skipped when the job does not run (the new version then starts cold).
1. ``stop_with_savepoint``: the old version finishes its batch and stops; the savepoint is pinned (kept
   out of housekeeping) because a rollback needs it. If this fails, nothing changed: the old version keeps
   running and no rollback runs.
2. ``restore_without_state`` (only with ``drop_state``): a new checkpoint generation seeded at the
   savepoint's offsets, for a query that changed incompatibly.
3. ``submit_new_version``: the new version starts (from the current checkpoint, or the seeded generation)
   and reports RUNNING; whether it consumes is the health gate's to judge. With a ready standby this is
   its go: it takes the job and starts its query (no driver start in the downtime); a standby whose old
   version was not running when the upgrade stopped it is ended instead, unless ``takeover_stopped``.
4. ``health_gate``: it must run, commit ``health_batches`` batches and not fall behind for
   ``health_window_seconds`` (a version that runs but consumes nothing fails here; before its first
   batch it has ``health_startup_seconds``, since a fresh driver's first batch is slow).
5. On a failure of 3 or 4, the rollback: ``rollback_stop_new_version`` (stopped at once if need be),
   ``rollback_restore_savepoint`` (a new generation copied from the pre-upgrade savepoint, state included),
   ``rollback_submit_previous_version`` (exactly as it was submitted before).
6. ``outcome``: succeeds when the new version is healthy; otherwise fails saying where the upgrade failed
   and whether the previous version runs again. The savepoint is unpinned once the upgrade is decided; a
   standby that never got its go is ended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator, Context, TaskGroup, TriggerRule
from airflow.sdk.exceptions import AirflowSkipException

from airflow_kafka_stream.core.values import flag
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.operators import stream_stats
from airflow_kafka_stream.operators.savepoints import StreamRestoreOperator
from airflow_kafka_stream.operators.standby import (
    StreamStandbyOperator,
    UpgradeStopOperator,
    UpgradeSubmitOperator,
)
from airflow_kafka_stream.operators.stop import StreamStopOperator
from airflow_kafka_stream.operators.submit import StreamSubmitOperator
from airflow_kafka_stream.ops.hot_standby import keep_hot_standby, wish
from airflow_kafka_stream.ops.results import StandbyHandle, StopResult
from airflow_kafka_stream.ops.upgrade import decide_outcome, pin_reason, savepoint_of
from airflow_kafka_stream.ops.upgrade_options import DEFAULTS as UPGRADE
from airflow_kafka_stream.ops.upgrade_options import stop_poll_seconds
from airflow_kafka_stream.ops.upgrade_phases import FORWARD, ROLLBACK, UpgradePhase
from airflow_kafka_stream.sensors.health import StreamJobHealthSensor
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters

# Lazy imports: hooks.spark_driver (the Spark provider's SparkSubmitHook) waits for an outcome task that launches a
# hot standby, so a DAG file's parse does not load it.

# Task ids are the phases' own names (ops.upgrade_phases): the grid shows the phases the command line announces.
STANDBY, STOP, RESTORE, SUBMIT, HEALTH = (phase.value for phase in FORWARD)
ROLLBACK_STOP, ROLLBACK_RESTORE, ROLLBACK_SUBMIT = (phase.value for phase in ROLLBACK)
#: How often the group's sensors and waits look, unless told: a task's look costs more than a loop's in one
#: process (a poke, a trigger's wake-up), so less often than the command line's ``UPGRADE.poll_seconds``. The
#: stop looks more often still where each look's delay is downtime (``stop_poll_seconds``).
TASK_POLL_SECONDS = 5.0


def stop_result_of(xcom: Mapping[str, Any] | None) -> StopResult | None:
    """The stop task's XCom as the stop's result (None when the stop did not run or failed)."""
    return StopResult.from_dict(xcom) if xcom else None


@refusals_name_parameters
class RollbackStopOperator(StreamStopOperator):
    """Stop the new version for a rollback; skipped when rollback is off, or when the upgrade failed before
    the old version stopped (nothing changed then)."""

    template_fields: Sequence[str] = (*StreamStopOperator.template_fields, "enabled")

    def __init__(self, *, stop_task_id: str, enabled: bool | str = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stop_task_id = stop_task_id
        self.enabled = enabled

    def execute(self, context: Context) -> dict[str, Any]:
        if not flag(self.enabled, "rollback"):
            raise AirflowSkipException("rollback is off for this upgrade")

        if savepoint_of(stop_result_of(context["ti"].xcom_pull(task_ids=self.stop_task_id))) is None:
            raise AirflowSkipException("the upgrade failed before the old version stopped with a savepoint: "
                                       "nothing changed, nothing to roll back")
        return super().execute(context)


@refusals_name_parameters
class UpgradeOutcomeOperator(JobHomeTask, BaseOperator):
    """Decide the upgrade: success when the new version is healthy, else a failure that says what happened."""

    template_fields: Sequence[str] = ("job_home", "new_version", "rollback")

    def __init__(self, *, job_home: str, new_version: str, group_id: str, storage_conn_id: str | None = None,
                 rollback: bool | str = True, spark_conn_id: str = "spark_default",
                 kafka_conn_id: str = "kafka_default", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rollback = rollback
        self.spark_conn_id = spark_conn_id
        self.kafka_conn_id = kafka_conn_id
        self.job_home = job_home
        self.new_version = new_version
        self.group_id = group_id
        self.storage_conn_id = storage_conn_id

    def _pull(self, context: Context, task: str) -> Any:
        return context["ti"].xcom_pull(task_ids=f"{self.group_id}.{task}")

    def execute(self, context: Context) -> dict[str, Any]:
        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        rolled_back = self._pull(context, ROLLBACK_SUBMIT)
        if rolled_back:
            stream_stats.incr(stream_stats.UPGRADE_ROLLBACKS, home.spec().get("job"))
        standby = self._pull(context, STANDBY)
        try:
            outcome = decide_outcome(home, self.new_version, stop_result_of(self._pull(context, STOP)),
                                     self._pull(context, HEALTH), rolled_back, flag(self.rollback, "rollback"),
                                     standby=StandbyHandle.of(standby) if standby else None)
        finally:  # whichever version runs now (the new one, or the old one rolled back) gets the job's hot standby
            self._keep_hot_standby(home)
        stream_stats.upgrade_emitted(home)
        return outcome.to_dict()

    def _keep_hot_standby(self, home) -> None:
        """The hot standby the job wants (``ops.hot_standby``), of the version that runs after the upgrade; a
        launch that fails is said here and left to the next supervisor or watchdog pass."""
        from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher

        if wish(home) is None:
            return
        hook = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id)
        try:
            launched = keep_hot_standby(home, AirflowSparkLauncher(self.job_home, self.spark_conn_id,
                                                                   hook.driver_kafka_config(), hook.storage_options()))
        except StreamError as exc:
            self.log.error("job %s: the hot standby of the version that runs now was not launched (the next "
                           "supervisor or watchdog pass launches it): %s", self.job_home, exc)
            return
        if launched is not None:
            self.log.info("job %s: hot standby of version %s launched (pid %s)", self.job_home, launched.app_version,
                          launched.pid)


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
    drop_state: bool | str = UPGRADE.drop_state,
    allow_sink_batch_log: bool = UPGRADE.allow_sink_batch_log,
    health_batches: int = UPGRADE.health_batches,
    health_window_seconds: float = UPGRADE.health_window_seconds,
    health_startup_seconds: float | str = UPGRADE.health_startup_seconds,
    rollback: bool | str = UPGRADE.rollback,
    spark_conn_id: str = "spark_default",
    kafka_conn_id: str = "kafka_default",
    storage_conn_id: str | None = None,
    spark_conf: dict[str, Any] | None = None,
    stop_timeout_seconds: float | str = UPGRADE.stop_timeout_seconds,
    start_timeout_seconds: float = UPGRADE.start_timeout_seconds,
    health_timeout_seconds: float | str = UPGRADE.health_timeout_seconds,
    poll_seconds: float = TASK_POLL_SECONDS,
    deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
    defer_after_seconds: float | None = None,
    standby: bool | str = UPGRADE.standby,
    standby_ready_timeout_seconds: float = UPGRADE.standby_ready_timeout_seconds,
    rehearsal_timeout_seconds: float = UPGRADE.rehearsal_timeout_seconds,
    takeover_stopped: bool | str = UPGRADE.takeover_stopped,
    executor_environment: str | None = None,
    deploy_mode: str | None = None,
    job_home_shared: bool = False,
    kafka_connector: str | None = None,
    source: str | None = None,
) -> TaskGroup:
    """The upgrade's tasks in a task group (see the module docstring); call it inside a DAG.

    ``standby`` (default on) starts the new version as a warm standby before the old one stops; off, the
    upgrade is cold (stop, then start a driver). The standby rehearses the new version's query on a copy of the
    job's state for at most ``rehearsal_timeout_seconds`` before it is READY (docs/standby.md); the
    ``standby_ready_timeout_seconds`` include it. ``executor_environment``, ``deploy_mode``,
    ``job_home_shared`` and ``kafka_connector`` are the new version's cluster settings, ``source`` its source (see
    StreamSubmitOperator; not given, the running version's carry over); a rollback starts
    the previous version with its own recorded ones.

    With ``deferrable``, the stop, the standby and the starts wait ``defer_after_seconds`` in their slot before
    they defer (see StreamStopOperator); the health gate, which watches a window, defers at once.

    ``standby``, ``drop_state`` and ``rollback`` may be templates (e.g. ``"{{ params.drop_state }}"``): the tasks they
    switch are then always in the group and skip themselves when off.
    """
    common = {"job_home": job_home, "storage_conn_id": storage_conn_id}
    waits = {"deferrable": deferrable, "defer_after_seconds": defer_after_seconds}
    with TaskGroup(group_id=group_id, tooltip=f"upgrade {job_home} to version {new_version}") as tasks:
        version = {"app_version": new_version, "application": application, "application_args": application_args,
                   "topics": topics, "group": group, "output_path": output_path, "spark_conn_id": spark_conn_id,
                   "kafka_conn_id": kafka_conn_id, "spark_conf": spark_conf, "poll_seconds": poll_seconds,
                   "executor_environment": executor_environment, "deploy_mode": deploy_mode,
                   "job_home_shared": job_home_shared, "kafka_connector": kafka_connector, "source": source}
        # With a standby, the stop gives the go itself when nothing is restored in between, and looks at the job
        # as often as the command line's upgrade does: each look's delay between the old version's end and the go
        # is downtime.
        stop = UpgradeStopOperator(task_id=STOP, savepoint=True, timeout_seconds=stop_timeout_seconds,
                                   poll_seconds=stop_poll_seconds(poll_seconds, standby=standby is not False),
                                   **waits, pin_reason=pin_reason(new_version), trigger_rule=TriggerRule.NONE_FAILED,
                                   standby_task_id=f"{group_id}.{STANDBY}" if standby is not False else None,
                                   restore_first=drop_state, **common)
        if standby is not False:
            StreamStandbyOperator(task_id=STANDBY, enabled=standby, ready_timeout_seconds=standby_ready_timeout_seconds,
                                  drop_state=drop_state, rehearsal_timeout_seconds=rehearsal_timeout_seconds,
                                  **waits, **version, **common) >> stop
        savepoint = f"{{{{ ti.xcom_pull(task_ids='{group_id}.{STOP}')['savepoint']['id'] }}}}"
        submit = UpgradeSubmitOperator(
            task_id=SUBMIT, standby_task_id=f"{group_id}.{STANDBY}" if standby is not False else None,
            stop_task_id=f"{group_id}.{STOP}", takeover_stopped=takeover_stopped, min_batches=0,
            timeout_seconds=start_timeout_seconds, trigger_rule=TriggerRule.NONE_FAILED, **waits, **version,
            **common)
        if drop_state is False:
            stop >> submit
        else:
            stop >> StreamRestoreOperator(task_id=RESTORE, savepoint_id=savepoint, drop_state=True, enabled=drop_state,
                                          allow_sink_batch_log=allow_sink_batch_log, **common) >> submit
        health = StreamJobHealthSensor(
            task_id=HEALTH, kafka_conn_id=kafka_conn_id, min_batches=health_batches,
            window_seconds=health_window_seconds, startup_seconds=health_startup_seconds,
            newer_than=f"{{{{ ti.xcom_pull(task_ids='{group_id}.{SUBMIT}', key='submit')['submitted_at'] }}}}",
            poke_interval=poll_seconds, timeout_seconds=health_timeout_seconds, deferrable=deferrable, mode="poke", **common)
        submit >> health
        outcome = UpgradeOutcomeOperator(task_id=UpgradePhase.OUTCOME.value, new_version=new_version, group_id=group_id,
                                         rollback=rollback, trigger_rule=TriggerRule.ALL_DONE, spark_conn_id=spark_conn_id,
                                         kafka_conn_id=kafka_conn_id, **common)
        health >> outcome
        if rollback is not False:
            stop_new = RollbackStopOperator(
                task_id=ROLLBACK_STOP, stop_task_id=f"{group_id}.{STOP}", enabled=rollback, savepoint=False,
                on_timeout="kill",
                timeout_seconds=stop_timeout_seconds, poll_seconds=poll_seconds, **waits,
                trigger_rule=TriggerRule.ONE_FAILED, **common)
            restore_previous = StreamRestoreOperator(task_id=ROLLBACK_RESTORE, savepoint_id=savepoint,
                                                     allow_sink_batch_log=allow_sink_batch_log, **common)
            submit_previous = StreamSubmitOperator(
                task_id=ROLLBACK_SUBMIT, from_submission=True,
                app_version=f"{{{{ ti.xcom_pull(task_ids='{group_id}.{STOP}')['app_version'] }}}}",
                spark_conn_id=spark_conn_id, kafka_conn_id=kafka_conn_id, min_batches=1,
                timeout_seconds=start_timeout_seconds, poll_seconds=poll_seconds, **waits, **common)
            [submit, health] >> stop_new >> restore_previous >> submit_previous >> outcome
    return tasks
