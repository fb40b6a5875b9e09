"""Stop a streaming job from a DAG: drain after the running batch, wait deferred, then take a savepoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator, Context

from airflow_kafka_stream.core.job_state import FINAL_STATES, state_names
from airflow_kafka_stream.core.values import flag, seconds
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.operators.lineage import JobLineage
from airflow_kafka_stream.operators.waiting import defer_after, wait_then_defer
from airflow_kafka_stream.ops.results import StopResult
from airflow_kafka_stream.ops.stop import StopOptions, StopPhase, complete_stop, conclude, request_stop
from airflow_kafka_stream.tasks.refusals import in_parameters, refusals_name_parameters
from airflow_kafka_stream.triggers.job_state import StreamJobStateTrigger

#: The wait ends on either final state; complete_stop turns FAILED into an error. Plain names: a trigger's
#: arguments are serialized.
FINAL = state_names(FINAL_STATES)


@refusals_name_parameters
class StreamStopOperator(JobLineage, JobHomeTask, BaseOperator):
    """Ask the job to finish its running micro-batch and stop, wait (briefly here, then deferred), then take a
    savepoint.

    A job that already ended (STOPPED, FAILED) is reported as it is: the stop is idempotent. When the job
    has not stopped within ``timeout_seconds``, ``on_timeout`` decides: ``withdraw`` (default) removes the
    request, the job keeps running as before and the task fails saying so; ``kill`` makes the job stop its
    query at once (the running batch is cancelled and re-runs on the next start) and the savepoint is of the
    last committed batch, which the result says. A stop never leaves a job half-stopped.

    XCom: the final state, the last committed batch and its offsets, and the savepoint (id, batch, offsets).

    :param job_home: the job's home directory (path or URL). Templated.
    :param savepoint: take a savepoint once the job stopped.
    :param app_version: application version recorded in the savepoint (default: the job's). Templated.
    :param timeout_seconds: how long the job may take to finish its batch and stop.
    :param on_timeout: ``withdraw`` or ``kill`` (see above).
    :param kill_timeout_seconds: with ``kill``, how long the job may take to answer it.
    :param poll_seconds: how often to read the job's status while waiting.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param deferrable: wait in the triggerer (default: Airflow's ``[operators] default_deferrable``).
    :param defer_after_seconds: with ``deferrable``, how long to wait here before deferring: most drains end
        within one batch, and a stop that ends here costs no defer and resume (default: ``[airflow_kafka_stream]
        defer_after_seconds``, else 30; 0 defers after one look).
    :param pin_reason: keep the savepoint out of housekeeping, giving this reason (templated) (an upgrade pins the
        savepoint it may roll back to, and unpins it when done).
    """

    template_fields: Sequence[str] = ("job_home", "app_version", "savepoint", "timeout_seconds", "on_timeout",
                                      "pin_reason")

    def __init__(self, *, job_home: str, savepoint: bool = True, app_version: str | None = None,
                 timeout_seconds: float = 300.0, on_timeout: str = "withdraw", kill_timeout_seconds: float = 60.0,
                 poll_seconds: float = 2.0, storage_conn_id: str | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 pin_reason: str | None = None, defer_after_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pin_reason = pin_reason
        self.defer_after_seconds = defer_after_seconds
        self.job_home = job_home
        self.savepoint = savepoint
        self.app_version = app_version
        self.timeout_seconds = timeout_seconds
        self.on_timeout = on_timeout
        self.kill_timeout_seconds = kill_timeout_seconds
        self.poll_seconds = poll_seconds
        self.storage_conn_id = storage_conn_id
        self.deferrable = deferrable
        if "{{" not in f"{on_timeout}{timeout_seconds}{savepoint}":
            try:
                self._options()
            except StreamError as exc:
                raise in_parameters(exc, type(self)) from None

    def _options(self) -> StopOptions:
        """The stop's options as ops checks them (at parse time, and again once templates are rendered)."""
        seconds(self.poll_seconds, "poll_seconds")
        return StopOptions(self.timeout_seconds, flag(self.savepoint, "savepoint"), self.app_version,
                           self.on_timeout, self.kill_timeout_seconds, self.pin_reason or None)

    def _home(self):
        return StreamJobHook(self.job_home, None, self.storage_conn_id).home()

    def execute(self, context: Context) -> dict[str, Any]:
        options = self._options()
        home = self._home()
        asked = request_stop(home)
        if not asked.was_running:
            self.log.info("job %s is not running (state %s): nothing to stop", self.job_home, asked.state)
            return self._finished(home, complete_stop(home, False, options))
        self.log.info("asked job %s to finish its batch and stop; waiting up to %.0fs", self.job_home,
                      options.timeout)
        return self._wait(StopPhase.DRAIN, options, context)

    def _wait(self, phase: StopPhase, options: StopOptions, context: Context) -> dict[str, Any]:
        trigger = StreamJobStateTrigger(job_home=self.job_home, target_states=FINAL,
                                        storage_conn_id=self.storage_conn_id, poll_seconds=self.poll_seconds,
                                        timeout_seconds=options.timeout_of(phase))
        # The phase is in the method's name, not in kwargs: dag.test() resumes with the event alone.
        return wait_then_defer(self, context, trigger,
                               "kill_complete" if phase is StopPhase.KILL else "execute_complete", {},
                               defer_after(self.defer_after_seconds))

    def kill_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The end of the wait for a killed job: as :meth:`execute_complete`, in the kill phase."""
        return self.execute_complete(context, event, phase=StopPhase.KILL)

    def execute_complete(self, context: Context, event: dict[str, Any], phase: str = StopPhase.DRAIN
                         ) -> dict[str, Any]:
        options = self._options()
        home = self._home()
        step = conclude(home, event, StopPhase(phase), options)
        if isinstance(step, StopPhase):
            return self._wait(step, options, context)
        result = self._finished(home, step)
        self.log.info("job %s stopped: batch %s%s", self.job_home, result["batch_id"],
                      f", savepoint {result['savepoint']['id']}" if result["savepoint"] else "")
        return result

    def _finished(self, home, stopped: StopResult) -> dict[str, Any]:
        """The stop's XCom: its result, with the application version that stopped (what an upgrade rolls
        back to)."""
        return stopped.to_dict()
