"""The upgrade's warm standby in Airflow: start it beside the running version, then hand the job over to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowSkipException

from airflow_kafka_stream.core.values import flag
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.operators.stop import StreamStopOperator
from airflow_kafka_stream.operators.submit import StreamSubmitOperator
from airflow_kafka_stream.operators.waiting import defer_after, wait_then_defer
from airflow_kafka_stream.ops.results import StandbyHandle, StopResult
from airflow_kafka_stream.ops.standby import conclude_ready, hand_over
from airflow_kafka_stream.ops.upgrade_options import DEFAULTS as UPGRADE
from airflow_kafka_stream.ops.upgrade_options import UpgradeOptions
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters
from airflow_kafka_stream.triggers.standby import StreamStandbyReadyTrigger

# Lazy imports: ops.upgrade waits for execute(), so a DAG file using only the standby's tasks does not load it.


@refusals_name_parameters
class StreamStandbyOperator(StreamSubmitOperator):
    """Start ``app_version`` as a warm standby of the running job and wait until it reports READY.

    Takes the submit operator's arguments (application, arguments, Spark settings, connections). The standby
    comes up while the old version runs and touches nothing of it; :class:`UpgradeSubmitOperator` later hands
    the job over to it. Skipped when ``enabled`` is off or the job does not run (the version then starts
    cold). When the standby fails to come up or is not READY within ``ready_timeout_seconds``, it is ended
    and the task fails: the upgrade fails before any downtime, the old version keeps running untouched.

    Waits like the submit (``defer_after_seconds`` in its slot, then deferred when ``deferrable``): a standby
    comes up in about a driver start, longer on a busy cluster. XCom: the standby's handle (token, version,
    pid, host, log).

    Before READY the standby rehearses the new version's own query on a private copy of the job's state
    (``docs/standby.md``); a version that the rehearsal finds incompatible fails this task, before any downtime.

    :param enabled: whether to use a standby (a bool or a rendered template). Templated.
    :param ready_timeout_seconds: how long the standby may take to report READY (its rehearsal included).
    :param drop_state: the upgrade drops the state (the rehearsal then runs from the offsets alone). Templated.
    :param rehearsal_timeout_seconds: how long the rehearsal may run before it is ended and reported as such.
    """

    template_fields: Sequence[str] = (*StreamSubmitOperator.template_fields, "drop_state")
    starts_a_new_version = True

    def __init__(self, *, enabled: bool | str = True,
                 ready_timeout_seconds: float = UPGRADE.standby_ready_timeout_seconds,
                 drop_state: bool | str = False, rehearsal_timeout_seconds: float = UPGRADE.rehearsal_timeout_seconds,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enabled = enabled
        self.ready_timeout_seconds = ready_timeout_seconds
        self.drop_state = drop_state
        self.rehearsal_timeout_seconds = rehearsal_timeout_seconds

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.ops.upgrade import start_standby

        if not flag(self.enabled, "standby"):
            raise AirflowSkipException("the standby is off for this upgrade: the new version starts cold")
        options = UpgradeOptions(drop_state=flag(self.drop_state, "drop_state"),
                                 standby_ready_timeout_seconds=float(self.ready_timeout_seconds),
                                 rehearsal_timeout_seconds=float(self.rehearsal_timeout_seconds))
        home, submission, launcher = self._launch_plan()
        said: list[str] = []
        handle = start_standby(home, submission, launcher, options, say=said.append)
        if handle is None:
            raise AirflowSkipException(said[-1])
        self.log.info("%s", said[-1])
        self._standby = handle.to_dict()
        self.log.info("standby of version %s: pid %s, log %s; waiting up to %ss for READY",
                      self.app_version, handle.pid, handle.driver_log, self.ready_timeout_seconds)
        context["ti"].xcom_push(key="standby", value=handle.to_dict())
        trigger = StreamStandbyReadyTrigger(job_home=self.job_home, standby=handle.to_dict(),
                                            storage_conn_id=self.storage_conn_id,
                                            poll_seconds=min(self.poll_seconds, 1.0),
                                            timeout_seconds=self.ready_timeout_seconds)
        return wait_then_defer(self, context, trigger, "ready_complete", {"standby": handle.to_dict()},
                               defer_after(self.defer_after_seconds))

    def on_kill(self) -> None:
        """A killed task ends the standby it launched (as Dataflow's operators cancel their job): nothing else
        would, and it would hold its driver until its own wait for a go times out."""
        end_standby_of(self, getattr(self, "_standby", None))

    def ready_complete(self, context: Context, event: dict[str, Any], standby: dict[str, Any] | None = None
                       ) -> dict[str, Any]:
        """The standby is READY: its handle to XCom. Else it is ended and the task fails before any downtime."""
        # dag.test() resumes a deferred task with the event alone, without the kwargs it deferred with.
        standby = standby or context["ti"].xcom_pull(task_ids=self.task_id, key="standby")
        self._standby = standby  # a task killed from here on still ends it
        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        conclude_ready(home, StandbyHandle.of(standby), event, self.ready_timeout_seconds, self._secrets())
        self.log.info("standby of version %s is READY: %s", self.app_version, event.get("message"))
        return standby


@refusals_name_parameters
class UpgradeStopOperator(StreamStopOperator):
    """The upgrade's stop with a savepoint that, with a ready standby and nothing to restore, gives it the go
    at once: the task that would give it next starts seconds later, and those seconds are downtime.

    Anything short of a clean handoff (the old version was not running, the standby is gone) is left to
    :class:`UpgradeSubmitOperator`, which refuses it with the rollback path intact. XCom: the stop's, plus
    ``handover`` when it gave the go.

    :param standby_task_id: the task whose XCom is the standby's handle.
    :param restore_first: a restore runs between the stop and the start (the upgrade's ``drop_state``): the go
        then waits for it. Templated.
    """

    template_fields: Sequence[str] = (*StreamStopOperator.template_fields, "restore_first")

    def __init__(self, *, standby_task_id: str | None = None, restore_first: bool | str = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.standby_task_id = standby_task_id
        self.restore_first = restore_first
        self._handle: dict[str, Any] | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        self._remember_standby(context)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any], phase: str = "drain") -> dict[str, Any]:
        self._remember_standby(context)
        return super().execute_complete(context, event, phase=phase)

    def on_kill(self) -> None:
        """A stop killed before it gave the go ends the standby: the upgrade cannot hand over any more."""
        end_standby_of(self, self._handle)

    def _remember_standby(self, context: Context) -> None:
        if self.standby_task_id and not flag(self.restore_first, "drop_state"):
            self._handle = context["ti"].xcom_pull(task_ids=self.standby_task_id)

    def _finished(self, home, stopped: StopResult) -> dict[str, Any]:
        result = super()._finished(home, stopped)
        if self._handle and result.get("was_running") and result.get("savepoint"):
            try:
                result["handover"] = hand_over(home, StandbyHandle.of(self._handle), stopped).to_dict()
                self.log.info("gave the standby (pid %s) the go", self._handle.get("pid"))
            except JobStateError as exc:  # the next task refuses it properly
                self.log.warning("no go for the standby here: %s", exc)
        return result


@refusals_name_parameters
class UpgradeSubmitOperator(StreamSubmitOperator):
    """The upgrade's start of the new version: the go to its standby when one is ready, else a cold submit.

    :param standby_task_id: the task whose XCom is the standby's handle (none or skipped: a cold submit).
    :param stop_task_id: the task that stopped the old version (its XCom says whether it was running).
    :param takeover_stopped: let the standby take over even when the old version was not running when the
        upgrade asked it to stop (it crashed, or another operator stopped it). Templated.
    """

    template_fields: Sequence[str] = (*StreamSubmitOperator.template_fields, "takeover_stopped")
    starts_a_new_version = True

    def __init__(self, *, standby_task_id: str | None = None, stop_task_id: str | None = None,
                 takeover_stopped: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.standby_task_id = standby_task_id
        self.stop_task_id = stop_task_id
        self.takeover_stopped = takeover_stopped

    def execute(self, context: Context) -> Any:
        handle = context["ti"].xcom_pull(task_ids=self.standby_task_id) if self.standby_task_id else None
        if not handle:
            return super().execute(context)
        self._check_min_batches()
        stopped = context["ti"].xcom_pull(task_ids=self.stop_task_id) or {}
        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        result = stopped.get("handover")  # the stop gave the go already
        if not result:
            result = hand_over(home, StandbyHandle.of(handle), StopResult.from_dict(stopped),
                               takeover_stopped=flag(self.takeover_stopped, "takeover_stopped")).to_dict()
            self.log.info("gave the standby of version %s (pid %s) the go", self.app_version, handle.get("pid"))
        return self._watch(context, result)


def end_standby_of(task: Any, handle: dict[str, Any] | None) -> None:
    """``on_kill``'s end of a standby that never got its go (``ops.upgrade.end_unused_standby``); a failure is
    logged, never raised: the task is being killed already."""
    if not handle:
        return
    from airflow_kafka_stream.ops.upgrade import end_unused_standby

    try:
        if end_unused_standby(StreamJobHook(task.job_home, None, task.storage_conn_id).home(),
                              StandbyHandle.of(handle)):
            task.log.warning("the task was killed: ended the standby of version %s (pid %s)",
                             handle.get("app_version"), handle.get("pid"))
    except Exception:  # noqa: BLE001 - on_kill must not raise
        task.log.exception("the task was killed, and ending its standby failed; end it with `standby end`")
