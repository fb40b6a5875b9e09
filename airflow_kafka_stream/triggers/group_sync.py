"""Wait, in the triggerer, until the consumer group's offsets equal the checkpoint's on every partition."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.triggers.polling import poll_until_done

# Lazy imports: hooks.stream_job (confluent-kafka, the Kafka provider) waits for a poll, so the triggerer and a DAG
# file's parse do not load it with the trigger.


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

    def poll(self) -> dict[str, Any]:
        """One look for the polling loop: ``success`` once in sync, else ``waiting`` with the partitions behind."""
        found = self.group_sync()
        if found["in_sync"]:
            return {"status": WaitStatus.SUCCESS, "message": "group offsets equal the checkpoint", **found}
        return {"status": WaitStatus.WAITING, "message": "not in sync: " + "; ".join(found["behind"][:10]), **found}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info("waiting up to %.0fs for the group of job %s to match its checkpoint", self.timeout_seconds,
                      self.job_home)
        async for event in poll_until_done(self, self.log.info, f"job {self.job_home}",
                                           "the group and the checkpoint"):
            yield event
