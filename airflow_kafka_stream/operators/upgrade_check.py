"""Would this upgrade go through? The upgrade's rehearsal as a task of its own, changing nothing of the job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowSkipException

from airflow_kafka_stream.core.values import flag, seconds
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.operators.submit import StreamSubmitOperator
from airflow_kafka_stream.ops.upgrade_options import DEFAULTS as UPGRADE
from airflow_kafka_stream.tasks.refusals import parameter_for, refusals_name_parameters

# Lazy imports: ops.upgrade, ops.upgrade_check and ops.standby (checkpoint, kafka groups) wait for execute(), so a
# DAG file's parse does not load them.


class UpgradeCheckFailed(StreamError):
    """The check ran and found that the upgrade, as asked, would stop before the old version is stopped."""


@refusals_name_parameters
class StreamUpgradeCheckOperator(StreamSubmitOperator):
    """Rehearse ``app_version`` on the running job's state and report whether an upgrade to it would go on.

    Takes the submit operator's arguments (application, arguments, Spark settings, connections), like
    :class:`~airflow_kafka_stream.operators.standby.StreamStandbyOperator`, and calls
    ``ops.upgrade_check.check_upgrade``: the new version starts as a standby that only reports, rehearses its own
    query on a private copy of the job's state, gives its verdict and is ended. Nothing of the job changes (its
    checkpoint, group, status, job.json, savepoints, output); its history records the check and the standby's
    launch and end. See ``docs/upgrade-check.md``.

    XCom (``return_value``, pushed before the task decides, so a failed check has it too): the check's
    ``to_dict()``: ``verdict`` (``compatible``, ``needs drop_state``, ``fails``, ``timed out``, ``not rehearsed``),
    ``reason``, ``would_upgrade``, what the rehearsal ran. When ``would_upgrade`` is false the task fails with the
    verdict, the reason and the parameter to change, unless ``fail_on_incompatible`` is off.

    It waits in its worker slot and does not defer (``deferrable`` is ignored): ``check_upgrade`` is one call
    that launches the standby, waits for its verdict and ends it whatever happens, under one history record;
    deferring would need that split into request, look and conclude in ``ops/``, and the standby ended by
    the triggerer's side on every path. A check lasts a driver start and the rehearsal (at most
    ``ready_timeout_seconds``), minutes at most, and is run by hand before an upgrade, not on a schedule.

    :param enabled: whether to run the check (a bool or a rendered template); off, the task skips. Templated.
    :param drop_state: the upgrade would drop the state: ``needs drop_state`` is then an upgrade that goes on.
        Templated.
    :param ready_timeout_seconds: how long the standby may take to give its verdict (its start included).
    :param rehearsal_timeout_seconds: how long the rehearsal itself may run.
    :param fail_on_incompatible: fail the task when the upgrade would not go on (default); off, it succeeds
        and the verdict is only in XCom and the log. Templated.
    """

    template_fields: Sequence[str] = (*StreamSubmitOperator.template_fields, "enabled", "drop_state",
                                      "fail_on_incompatible")
    starts_a_new_version = True

    def __init__(self, *, enabled: bool | str = True, drop_state: bool | str = False,
                 ready_timeout_seconds: float = UPGRADE.standby_ready_timeout_seconds,
                 rehearsal_timeout_seconds: float = UPGRADE.rehearsal_timeout_seconds,
                 fail_on_incompatible: bool | str = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enabled = enabled
        self.drop_state = drop_state
        self.ready_timeout_seconds = seconds(ready_timeout_seconds, "ready_timeout_seconds")
        self.rehearsal_timeout_seconds = seconds(rehearsal_timeout_seconds, "rehearsal_timeout_seconds")
        self.fail_on_incompatible = fail_on_incompatible

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.ops.upgrade import UpgradeOptions
        from airflow_kafka_stream.ops.upgrade_check import check_upgrade

        if not flag(self.enabled, "enabled"):
            raise AirflowSkipException("the upgrade check is off for this run")
        fail = flag(self.fail_on_incompatible, "fail_on_incompatible")
        options = UpgradeOptions(drop_state=flag(self.drop_state, "drop_state"),
                                 standby_ready_timeout_seconds=self.ready_timeout_seconds,
                                 rehearsal_timeout_seconds=self.rehearsal_timeout_seconds,
                                 poll_seconds=min(float(self.poll_seconds), 1.0))
        home, submission, launcher = self._launch_plan()
        found = check_upgrade(home, submission, launcher, options, secrets=self._secrets(), say=self.log.info)
        result = found.to_dict()
        context["ti"].xcom_push(key="return_value", value=result)
        if found.would_upgrade:
            self.log.info("an upgrade to version %s would go on: %s", self.app_version, found.verdict)
            return result
        words, settings = found.way_out
        parameters = tuple(parameter_for(type(self), setting) or setting for setting in settings)
        message = (f"an upgrade of {self.job_home} to version {self.app_version} would not go on: {found.verdict}: "
                   f"{found.reason}\nnothing was changed; {words}"
                   + (f"\n--- end of {found.log} ---\n{found.log_tail}" if found.log_tail else ""))
        if not fail:
            self.log.warning("%s (fail_on_incompatible is off: the task succeeds)", message)
            return result
        raise UpgradeCheckFailed(message, setting=parameters)

    def on_kill(self) -> None:
        """A killed task ends its check's standby: the check's own end never runs then, and the standby would
        hold its driver until its wait times out. A failure is logged, never raised."""
        from airflow_kafka_stream.ops.standby import end_standby, live_standby

        try:
            home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
            record = home.standby_record() or {}
            handle = live_standby(home)
            if (handle is not None and handle.token == record.get("token")
                    and (record.get("rehearse") or {}).get("check") and handle.app_version == str(self.app_version)):
                end_standby(home, handle, "the upgrade check's task was killed")
                self.log.warning("the task was killed: ended the check's standby (pid %s)", handle.pid)
        except Exception:  # noqa: BLE001 - on_kill must not raise
            self.log.exception("the task was killed, and ending its check's standby failed; end it with "
                               "`standby end`")


class UpgradeUnlessCheckOnlyOperator(JobHomeTask, ShortCircuitOperator):
    """The short circuit between an upgrade DAG's check and its upgrade: a check-only run skips every task of the
    upgrade after it; otherwise it passes. It takes the job home for the "Stream job" link every task of an
    upgrade run has (and the log line that names the job).

    :param job_home: the job's home directory (path or URL). Templated.
    :param check_only: whether this run only checks (a bool or a rendered template). Templated.
    """

    template_fields: Sequence[str] = (*ShortCircuitOperator.template_fields, "job_home")

    def __init__(self, *, job_home: str, check_only: bool | str, **kwargs: Any) -> None:
        # check_only is rendered as one of op_args, a template field of the PythonOperator.
        super().__init__(python_callable=_upgrade_wanted, op_args=[check_only], **kwargs)
        self.job_home = job_home


def _upgrade_wanted(check_only: bool | str) -> bool:
    return not flag(check_only, "check_only")
