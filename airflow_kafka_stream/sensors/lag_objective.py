"""Hold a job to its lag objective: succeed while its time lag is within it, fail on a breach (poke or deferred)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowSkipException

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.objective import LagObjective
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.tasks.objective_check import UNSET, refuse_bad_objective
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters
from airflow_kafka_stream.triggers.lag_objective import StreamLagObjectiveTrigger

# Lazy imports: ops.objective (storage) waits for execute(), so a DAG file's parse does not load it.


@refusals_name_parameters
class StreamLagObjectiveSensor(JobHomeTask, BaseSensorOperator):
    """Check the job's lag objective: its time lag (how old the oldest record not processed yet is, from the
    job's status) at most ``max_lag_seconds``, exceeded for no longer than ``for_seconds``.

    Succeeds once the time lag is within the objective; fails on a breach (above it at every look for
    ``for_seconds``, across this task's looks and earlier checks of the job) with the partitions above it,
    their lag in seconds and its trend, so Airflow's failure callbacks and alerting fire; waits while the lag
    is above for a shorter time or not measured yet; is skipped when the job does not run. The objective is
    recorded in the job home (the job page shows it) and every breach is an ``objective-breach`` history
    record. XCom: the last look's judgement.

    :param job_home: the job's home directory (path or URL). Templated.
    :param max_lag_seconds: the time lag the job may have at most, in seconds, above 0 (None: the objective
        recorded in the job home by an earlier check; skipped when there is none). Templated.
    :param for_seconds: how long, in seconds above 0, the time lag may stay above ``max_lag_seconds`` before
        that is a breach. Templated.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param deferrable: wait in the triggerer (default: Airflow's ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = ("job_home", "max_lag_seconds", "for_seconds")

    def __init__(self, *, job_home: str, max_lag_seconds: float | str | None = None,
                 for_seconds: float | str | None = None, storage_conn_id: str | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        refuse_bad_objective(max_lag_seconds, for_seconds)  # refused here, naming the parameter
        self.job_home = job_home
        self.max_lag_seconds = max_lag_seconds
        self.for_seconds = for_seconds
        self.storage_conn_id = storage_conn_id
        self.deferrable = deferrable
        self._objective: LagObjective | None = None

    def _home(self):
        return StreamJobHook(self.job_home, None, self.storage_conn_id).home()

    def _resolve(self) -> LagObjective:
        """The objective from the (rendered) parameters, else the one recorded in the job home."""
        from airflow_kafka_stream.ops.objective import record_objective, recorded_objective

        home = self._home()
        if self.max_lag_seconds in UNSET and self.for_seconds in UNSET:
            recorded = recorded_objective(home)
            if recorded is None:
                raise AirflowSkipException(f"job {self.job_home} has no lag objective: give max_lag_seconds and "
                                           "for_seconds")
            return recorded
        objective = LagObjective.of(self.max_lag_seconds, self.for_seconds)
        record_objective(home, objective, by=self.task_id)
        return objective

    def execute(self, context: Context) -> Any:
        self._objective = self._resolve()
        self.log.info("job %s: lag objective %s", self.job_home, self._objective)
        first = self.poke(context)
        if first.is_done or not self.deferrable:
            return first.xcom_value if first.is_done else super().execute(context)
        self.defer(trigger=StreamLagObjectiveTrigger(
            job_home=self.job_home, max_lag_seconds=self._objective.max_lag_seconds,
            for_seconds=self._objective.for_seconds, storage_conn_id=self.storage_conn_id,
            poll_seconds=self.poke_interval, timeout_seconds=self.timeout, by=self.task_id),
            method_name="execute_complete")

    def poke(self, context: Context) -> PokeReturnValue:
        from airflow_kafka_stream.ops.objective import look_objective

        objective = self._objective or self._resolve()
        return self._outcome(look_objective(self._home(), objective, by=self.task_id))

    def _outcome(self, event: dict[str, Any]) -> PokeReturnValue:
        self.log.info("job %s: %s", self.job_home, event.get("message"))
        if event.get("status") == "skipped":
            raise AirflowSkipException(f"job {self.job_home}: {event.get('message')}")
        if event.get("status") not in (WaitStatus.SUCCESS, WaitStatus.WAITING):
            raise JobStateError(f"job {self.job_home}: {event.get('message')}")
        done = event["status"] == WaitStatus.SUCCESS
        return PokeReturnValue(is_done=done, xcom_value=event.get("check") if done else None)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any] | None:
        if event.get("status") == WaitStatus.TIMEOUT and self.soft_fail:  # still above, not yet a breach: skipped
            raise AirflowSkipException(f"job {self.job_home}: {event.get('message')}")
        outcome = self._outcome(event)
        if not outcome.is_done:
            raise JobStateError(f"job {self.job_home}: {event.get('message')}")
        return outcome.xcom_value
