"""Wait, in the triggerer, until an upgrade's warm standby reports READY (or fails to come up).

It reads the job home's ``control/standby.json`` and judges each read with ``core.standby``'s rules (the
standby's token, its process where that can be told from here, its heartbeat). It yields one event and
ends nothing itself: the operator ends a standby that failed, under its own record in the history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_stream.triggers.polling import poll_until_done

# Lazy imports: hooks.stream_job and ops.standby (confluent-kafka, the Kafka provider) wait for a poll, so the
# triggerer and a DAG file's parse do not load them with the trigger.


class StreamStandbyReadyTrigger(BaseTrigger):
    """Yield ``success`` when the standby is READY, ``failed`` when it cannot become so, or ``timeout``.

    :param job_home: the job's home directory (path or URL).
    :param standby: the standby's handle as the operator pushed it to XCom (token, version, pid, host, log;
        no secret).
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param poll_seconds: how often to read the standby's record.
    :param timeout_seconds: how long the standby may take.
    """

    def __init__(self, job_home: str, standby: dict[str, Any], storage_conn_id: str | None = None,
                 poll_seconds: float = 2.0, timeout_seconds: float = 600.0) -> None:
        super().__init__()
        self.job_home = job_home
        self.standby = dict(standby)
        self.storage_conn_id = storage_conn_id
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"job_home": self.job_home, "standby": self.standby, "storage_conn_id": self.storage_conn_id,
                 "poll_seconds": self.poll_seconds, "timeout_seconds": self.timeout_seconds})

    def poll(self) -> dict[str, Any]:
        """One look at the standby (blocking: it reads storage), as ``ops.standby.look_standby`` takes it."""
        from airflow_kafka_stream.hooks.stream_job import StreamJobHook
        from airflow_kafka_stream.ops.standby import StandbyHandle, look_standby

        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        return look_standby(home, StandbyHandle.of(self.standby))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info("waiting up to %.0fs for the standby of version %s of job %s to be ready",
                      self.timeout_seconds, self.standby.get("app_version"), self.job_home)
        async for event in poll_until_done(self, self.log.info, f"standby of job {self.job_home}",
                                           "the standby's record"):
            yield event
