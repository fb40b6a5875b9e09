"""Gate on a job's health: running, batches committed, lag not growing (a job consuming nothing fails)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from airflow_kafka_stream.core.health import HealthSpec
from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.triggers.health import StreamJobHealthTrigger


class StreamJobHealthSensor(JobHomeTask, BaseSensorOperator):
    """Succeed when the job runs, has committed ``min_batches`` batches, and its lag does not grow for
    ``window_seconds``; fail when it failed, died, never got going, falls behind or consumes nothing.

    XCom: the job's summary, the lag samples (``lag``, records) with the driver's time lag at each
    (``time_lag_seconds``, the oldest unprocessed record's age), and its last time lag per partition (``time_lag``).

    :param job_home: the job's home directory (path or URL). Templated.
    :param kafka_conn_id: the ``kafka`` connection (watermarks for the lag).
    :param min_batches: batches the current run must commit first.
    :param window_seconds: how long the lag must not grow afterwards.
    :param startup_seconds: how long the run may take to commit its first batch before it counts as
        consuming nothing (a fresh driver's first batch is slow). Templated.
    :param lag_tolerance: lag (records) that never counts as growing.
    :param newer_than: ISO time; a status from a run started before it belongs to an earlier run. Templated.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param timeout_seconds: how long the whole check may take (a templated stand-in for ``timeout``).
    :param deferrable: wait in the triggerer (default: Airflow's ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = ("job_home", "newer_than", "min_batches", "window_seconds", "timeout_seconds",
                                      "startup_seconds")

    def __init__(self, *, job_home: str, kafka_conn_id: str = "kafka_default", min_batches: int = 1,
                 window_seconds: float = 60.0, lag_tolerance: int = 0, newer_than: str | None = None,
                 storage_conn_id: str | None = None, timeout_seconds: float | str | None = None,
                 startup_seconds: float | str = 300.0,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.mode == "reschedule":
            raise InvalidInputError("the health sensor keeps lag samples between pokes: use mode='poke' or "
                                    "deferrable=True, not mode='reschedule'")
        if not any(isinstance(value, str) for value in (min_batches, window_seconds, startup_seconds)):
            try:
                HealthSpec(min_batches, window_seconds, lag_tolerance, startup_seconds=startup_seconds)
            except ValueError as exc:
                raise InvalidInputError(str(exc)) from None
        self.job_home = job_home
        self.kafka_conn_id = kafka_conn_id
        self.min_batches = min_batches
        self.window_seconds = window_seconds
        self.startup_seconds = startup_seconds
        self.lag_tolerance = lag_tolerance
        self.newer_than = newer_than
        self.storage_conn_id = storage_conn_id
        self.deferrable = deferrable
        self.timeout_seconds = timeout_seconds
        self._look = None
        self._started: float | None = None

    def _spec(self) -> HealthSpec:
        newer = datetime.fromisoformat(self.newer_than) if self.newer_than else None
        try:
            return HealthSpec(int(self.min_batches), float(self.window_seconds), self.lag_tolerance, newer,
                              startup_seconds=float(self.startup_seconds))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"health gate settings: {exc}") from None

    def execute(self, context: Context) -> Any:
        spec = self._spec()  # rendered values checked before anything waits on them
        self.min_batches, self.window_seconds = spec.min_batches, spec.window_seconds
        self.startup_seconds = spec.startup_seconds
        if self.timeout_seconds is not None:
            try:
                self.timeout = float(self.timeout_seconds)
            except (TypeError, ValueError):
                raise InvalidInputError(f"timeout_seconds must be a number, got {self.timeout_seconds!r}") from None
        if not self.deferrable:
            return super().execute(context)
        self.defer(
            trigger=StreamJobHealthTrigger(
                job_home=self.job_home, kafka_conn_id=self.kafka_conn_id, min_batches=self.min_batches,
                window_seconds=self.window_seconds, lag_tolerance=self.lag_tolerance, newer_than=self.newer_than,
                startup_seconds=self.startup_seconds,
                storage_conn_id=self.storage_conn_id, poll_seconds=self.poke_interval, timeout_seconds=self.timeout),
            method_name="execute_complete",
        )

    def poke(self, context: Context) -> PokeReturnValue:
        if self._look is None:  # one look for the whole gate: it keeps the lag samples between pokes
            self._look = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id).health_look(
                self._spec(), float("inf"))
        event = self._look()
        self.log.info("job %s: %s", self.job_home, event["message"])
        if event["status"] == WaitStatus.FAILED:
            raise JobStateError(f"job {self.job_home} is not healthy: {event['message']}")
        done = event["status"] == WaitStatus.SUCCESS
        value = {"job": event.get("job"), "lag": event.get("lag"), "message": event["message"],
                 "time_lag_seconds": event.get("time_lag_seconds"), "time_lag": event.get("time_lag")}
        return PokeReturnValue(is_done=done, xcom_value=value if done else None)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != WaitStatus.SUCCESS:
            raise JobStateError(f"job {self.job_home} is not healthy: {event.get('message')}")
        self.log.info("job %s: %s", self.job_home, event.get("message"))
        return {"job": event.get("job"), "lag": event.get("lag"), "message": event.get("message"),
                "time_lag_seconds": event.get("time_lag_seconds"), "time_lag": event.get("time_lag")}
