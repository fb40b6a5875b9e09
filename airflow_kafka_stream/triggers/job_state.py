"""Wait, in the triggerer, until a streaming job reaches a state (RUNNING with N batches, STOPPED, ...).

The trigger polls the job home's ``status.json`` and judges each read with
``core.job_watch``; it yields exactly one event. It keeps only serializable
arguments (the job home, a storage connection id, never a configuration with
secrets), reads storage off the event loop, and may run more than once: a
restarted triggerer simply starts polling again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_stream.core.job_watch import WatchSpec
from airflow_kafka_stream.ops.watch import look_job
from airflow_kafka_stream.triggers.polling import poll_until_done

# Lazy imports: hooks.stream_job (confluent-kafka, the Kafka provider) waits for a poll, so the triggerer and a DAG
# file's parse do not load it with the trigger.


class StreamJobStateTrigger(BaseTrigger):
    """Yield one event when the job reaches one of ``target_states``, fails, dies, or the timeout passes.

    :param job_home: the job's home directory (path or URL).
    :param target_states: the states that end the wait successfully (e.g. ``["RUNNING"]``, ``["STOPPED"]``).
    :param min_batches: with RUNNING, how many batches the current run must have committed.
    :param newer_than: ISO time: a status whose run started before it belongs to an earlier run.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param poll_seconds: how often to read the status.
    :param timeout_seconds: how long to wait before yielding a ``timeout`` event.
    :param max_heartbeat_age: seconds without a heartbeat after which a running job counts as dead.
    :param driver_pid: the pid of a driver just launched on ``driver_host``: when it exits before the job
        reports what is awaited (a broken application that never writes a status), the wait fails at once.
    :param driver_host: the host of ``driver_pid``.
    """

    def __init__(self, job_home: str, target_states: list[str], min_batches: int = 0,
                 newer_than: str | None = None, storage_conn_id: str | None = None, poll_seconds: float = 5.0,
                 timeout_seconds: float = 600.0, max_heartbeat_age: float = 30.0, driver_pid: int | None = None,
                 driver_host: str | None = None) -> None:
        super().__init__()
        self.driver_pid = driver_pid
        self.driver_host = driver_host
        self.job_home = job_home
        self.target_states = list(target_states)
        self.min_batches = min_batches
        self.newer_than = newer_than
        self.storage_conn_id = storage_conn_id
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.max_heartbeat_age = max_heartbeat_age

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_home": self.job_home,
                "target_states": self.target_states,
                "min_batches": self.min_batches,
                "newer_than": self.newer_than,
                "storage_conn_id": self.storage_conn_id,
                "poll_seconds": self.poll_seconds,
                "timeout_seconds": self.timeout_seconds,
                "max_heartbeat_age": self.max_heartbeat_age,
                "driver_pid": self.driver_pid,
                "driver_host": self.driver_host,
            },
        )

    def spec(self) -> WatchSpec:
        newer = datetime.fromisoformat(self.newer_than) if self.newer_than else None
        return WatchSpec.of(self.target_states, self.min_batches, newer, self.max_heartbeat_age)

    def poll(self) -> dict[str, Any]:
        """One look at the job (blocking: it reads storage), the look every driver of a wait runs
        (``ops.watch.look_job``); an operator that waits in its slot first calls this too."""
        from airflow_kafka_stream.hooks.stream_job import StreamJobHook

        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home(require=False)
        return look_job(home, self.spec(), self.driver_pid, self.driver_host)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            self.spec()
        except ValueError as exc:
            yield TriggerEvent({"status": "error", "message": str(exc), "job": {"state": None}})
            return
        self.log.info("waiting up to %.0fs for job %s to reach %s", self.timeout_seconds, self.job_home,
                      "/".join(self.target_states))
        async for event in poll_until_done(self, self.log.info, f"job {self.job_home}", "the job's status"):
            yield event
