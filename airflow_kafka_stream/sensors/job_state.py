"""Wait for a streaming job to reach a state: in poke mode, or deferred to the triggerer (no worker slot)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.job_watch import WaitStatus, WatchSpec
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.ops.watch import look_job
from airflow_kafka_stream.triggers.job_state import StreamJobStateTrigger

# Lazy imports: hooks.stream_job (confluent-kafka, the Kafka provider) waits for a poke, so a DAG file's parse does
# not load it.


class StreamJobStateSensor(JobHomeTask, BaseSensorOperator):
    """Succeed when the job reaches one of ``target_states``; fail when it fails, dies or stops elsewhere.

    The job's summary (state, generation, last batch and offsets, heartbeat age) goes to XCom.

    :param job_home: the job's home directory (path or URL). Templated.
    :param target_states: states that end the wait successfully, e.g. ``["RUNNING"]``.
    :param min_batches: with RUNNING, batches the current run must have committed (0: any).
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param max_heartbeat_age: seconds without a heartbeat after which a running job counts as dead.
    :param deferrable: wait in the triggerer instead of a worker slot (default: Airflow's
        ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = ("job_home",)

    def __init__(self, *, job_home: str, target_states: Sequence[str] = (JobState.RUNNING.value,), min_batches: int = 0,
                 storage_conn_id: str | None = None, max_heartbeat_age: float = 30.0,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_home = job_home
        self.target_states = list(target_states)
        self.min_batches = min_batches
        self.storage_conn_id = storage_conn_id
        self.max_heartbeat_age = max_heartbeat_age
        self.deferrable = deferrable
        # Fail at parse time, naming the argument, rather than at the first poke.
        WatchSpec.of(self.target_states, min_batches, None, max_heartbeat_age)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        event = self.poke(context)
        if event.is_done:
            return event.xcom_value
        self.defer(
            trigger=StreamJobStateTrigger(
                job_home=self.job_home, target_states=self.target_states, min_batches=self.min_batches,
                storage_conn_id=self.storage_conn_id, poll_seconds=self.poke_interval,
                timeout_seconds=self.timeout, max_heartbeat_age=self.max_heartbeat_age),
            method_name="execute_complete",
        )

    def poke(self, context: Context) -> PokeReturnValue:
        from airflow_kafka_stream.hooks.stream_job import StreamJobHook

        # A job just submitted may not have created its home yet: no status is a reason to wait, not to fail.
        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home(require=False)
        event = look_job(home, WatchSpec.of(self.target_states, self.min_batches, None, self.max_heartbeat_age))
        self.log.info("job %s: %s", self.job_home, event["message"])
        if event["status"] == WaitStatus.FAILED:
            raise JobStateError(f"job {self.job_home}: {event['message']}")
        done = event["status"] == WaitStatus.SUCCESS
        return PokeReturnValue(is_done=done, xcom_value=event["job"] if done else None)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != WaitStatus.SUCCESS:
            raise JobStateError(f"job {self.job_home}: {event.get('message')}")
        self.log.info("job %s: %s", self.job_home, event.get("message"))
        return event["job"]
