"""Wait, in the triggerer, until a job's time lag is within its objective, or the objective is breached."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_stream.core.objective import LagObjective
from airflow_kafka_stream.triggers.polling import poll_until_done

# Lazy imports: hooks.stream_job (confluent-kafka, the Kafka provider) and ops.objective wait for a poll, so the
# triggerer and a DAG file's parse do not load them with the trigger.


class StreamLagObjectiveTrigger(BaseTrigger):
    """Yield one event: ``success`` within the objective, ``failed`` on a breach (the time lag above
    ``max_lag_seconds`` for ``for_seconds``), ``skipped`` when the job does not run, ``timeout`` otherwise.
    Each poll is ``ops.objective.look_objective``, which the sensor's pokes run too.

    :param job_home: the job's home directory (path or URL).
    :param max_lag_seconds: the time lag the job may have at most (seconds).
    :param for_seconds: how long the time lag may stay above it before that is a breach.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param poll_seconds: how often to look.
    :param timeout_seconds: how long to wait.
    :param by: who the breach records name (the task).
    """

    def __init__(self, job_home: str, max_lag_seconds: float, for_seconds: float,
                 storage_conn_id: str | None = None, poll_seconds: float = 30.0, timeout_seconds: float = 3600.0,
                 by: str | None = None) -> None:
        super().__init__()
        self.job_home = job_home
        self.max_lag_seconds = max_lag_seconds
        self.for_seconds = for_seconds
        self.storage_conn_id = storage_conn_id
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.by = by

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {name: getattr(self, name) for name in ("job_home", "max_lag_seconds", "for_seconds",
                                                        "storage_conn_id", "poll_seconds", "timeout_seconds",
                                                        "by")})

    def poll(self) -> dict[str, Any]:
        """One look (blocking: it reads and writes the job home)."""
        from airflow_kafka_stream.hooks.stream_job import StreamJobHook
        from airflow_kafka_stream.ops.objective import look_objective

        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        return look_objective(home, LagObjective.of(self.max_lag_seconds, self.for_seconds), by=self.by)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info("watching the lag objective of job %s for up to %.0fs", self.job_home, self.timeout_seconds)
        async for event in poll_until_done(self, self.log.info, f"job {self.job_home}", "the job's time lag"):
            yield event
