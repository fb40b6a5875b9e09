"""Wait, in the triggerer, until a started job proves healthy or not (an upgrade's health gate).

Each poll reads the job's status and, once it runs with enough batches, the
high watermarks of its partitions, and hands both to ``core.health``. It keeps
connection ids only, runs blocking clients off the event loop, may run more
than once (the window starts again) and yields one event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_stream.core.health import HealthSpec
from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.triggers.polling import poll_until_done

# Lazy imports: hooks.stream_job (confluent-kafka, the Kafka provider) waits for a poll, so the triggerer and a DAG
# file's parse do not load it with the trigger.


class StreamJobHealthTrigger(BaseTrigger):
    """Yield one event: ``success`` when the job is healthy, ``failed`` with why when it is not.

    :param job_home: the job's home directory (path or URL).
    :param kafka_conn_id: the ``kafka`` connection (watermarks for the lag).
    :param min_batches: batches the run must commit first.
    :param window_seconds: how long the lag must not grow afterwards.
    :param lag_tolerance: lag (records) that never counts as growing.
    :param newer_than: ISO time: a status from a run started before it belongs to an earlier run.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param poll_seconds: how often to look.
    :param timeout_seconds: how long the whole check may take.
    :param startup_seconds: how long the run may take to commit its first batch before it counts as stalled.
    """

    def __init__(self, job_home: str, kafka_conn_id: str, min_batches: int = 1, window_seconds: float = 60.0,
                 lag_tolerance: int = 0, newer_than: str | None = None, storage_conn_id: str | None = None,
                 poll_seconds: float = 5.0, timeout_seconds: float = 900.0, startup_seconds: float = 300.0) -> None:
        super().__init__()
        self.startup_seconds = startup_seconds
        self.job_home = job_home
        self.kafka_conn_id = kafka_conn_id
        self.min_batches = min_batches
        self.window_seconds = window_seconds
        self.lag_tolerance = lag_tolerance
        self.newer_than = newer_than
        self.storage_conn_id = storage_conn_id
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {name: getattr(self, name) for name in (
                    "job_home", "kafka_conn_id", "min_batches", "window_seconds", "lag_tolerance", "newer_than",
                    "storage_conn_id", "poll_seconds", "timeout_seconds", "startup_seconds")})

    def spec(self) -> HealthSpec:
        newer = datetime.fromisoformat(self.newer_than) if self.newer_than else None
        return HealthSpec(self.min_batches, self.window_seconds, self.lag_tolerance, newer,
                          startup_seconds=self.startup_seconds)

    def look(self, spec: HealthSpec):
        """The gate's look (``StreamJobHook.health_look``, which the sensor's pokes use too): it keeps its lag
        samples for the whole gate."""
        from airflow_kafka_stream.hooks.stream_job import StreamJobHook

        return StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id).health_look(
            spec, self.timeout_seconds)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            spec = self.spec()
        except ValueError as exc:
            yield TriggerEvent({"status": WaitStatus.ERROR, "message": str(exc), "job": {"state": None}})
            return
        self.log.info("watching the health of job %s for up to %.0fs", self.job_home, self.timeout_seconds)
        try:
            look = await asyncio.to_thread(self.look, spec)
        except Exception as exc:  # noqa: BLE001 - the event carries the reason
            yield TriggerEvent({"status": WaitStatus.ERROR, "message": f"cannot observe the job: {exc}",
                                "job": {"state": None}})
            return
        # The look ends the gate itself when its time is up; the loop's deadline, one look later, only backs it.
        gate = _Gate(look, self.timeout_seconds + self.poll_seconds, self.poll_seconds)
        async for event in poll_until_done(gate, self.log.info, f"job {self.job_home}", "the job"):
            yield event


@dataclass
class _Gate:
    """The health gate's look as a polling trigger (``triggers.polling``): it keeps its lag samples."""

    poll: Callable[[], dict[str, Any]]
    timeout_seconds: float
    poll_seconds: float
