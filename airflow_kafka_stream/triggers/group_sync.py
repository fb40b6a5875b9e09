"""Wait, in the triggerer, until the consumer group's offsets equal the checkpoint's on every partition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_stream.core.job_watch import WaitStatus


class StreamGroupSyncTrigger(BaseTrigger):
    """Yield one event: ``success`` once group and checkpoint agree on every partition, ``timeout`` otherwise.

    :param job_home: the job's home directory (path or URL).
    :param kafka_conn_id: the ``kafka`` connection.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param poll_seconds: how often to compare.
    :param timeout_seconds: how long to wait.
    """

    def __init__(self, job_home: str, kafka_conn_id: str, storage_conn_id: str | None = None,
                 poll_seconds: float = 10.0, timeout_seconds: float = 600.0) -> None:
        super().__init__()
        self.job_home = job_home
        self.kafka_conn_id = kafka_conn_id
        self.storage_conn_id = storage_conn_id
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"job_home": self.job_home, "kafka_conn_id": self.kafka_conn_id,
                 "storage_conn_id": self.storage_conn_id, "poll_seconds": self.poll_seconds,
                 "timeout_seconds": self.timeout_seconds})

    def group_sync(self) -> dict[str, Any]:
        """One comparison (blocking: it reads storage and the brokers): ``StreamJobHook.group_sync``, which the
        sensor's pokes call too."""
        from airflow_kafka_stream.hooks.stream_job import StreamJobHook

        return StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id).group_sync()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_seconds
        self.log.info("waiting up to %.0fs for the group of job %s to match its checkpoint", self.timeout_seconds,
                      self.job_home)
        while True:
            try:
                found = await asyncio.to_thread(self.group_sync)
            except Exception as exc:  # noqa: BLE001 - the event carries the reason
                yield TriggerEvent({"status": "error", "message": f"cannot compare group and checkpoint: {exc}"})
                return
            if found["in_sync"]:
                yield TriggerEvent({"status": WaitStatus.SUCCESS, "message": "group offsets equal the checkpoint", **found})
                return
            if time.monotonic() >= deadline:
                yield TriggerEvent({"status": WaitStatus.TIMEOUT, "message": f"not in sync after {self.timeout_seconds:.0f}s: "
                                                                    + "; ".join(found["behind"][:10]), **found})
                return
            await asyncio.sleep(self.poll_seconds)
