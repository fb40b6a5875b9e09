"""Supervise a streaming job from the triggerer: restart it within seconds of a crash, holding no worker slot."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from airflow.sdk import Context

from airflow_kafka_stream.core.watchdog import SUPERVISOR
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.operators.watchdog import StreamWatchdogOperator
from airflow_kafka_stream.triggers.supervisor import DUE, ERROR, STOPPED, StreamJobLivenessTrigger


class StreamSupervisorOperator(StreamWatchdogOperator):
    """Run a watchdog pass, then wait deferred until the job needs another, for as long as the job runs.

    The wait is ``StreamJobLivenessTrigger`` in the triggerer: it fires as soon as the job is dead by the one
    liveness rule (a driver gone from this host at once, one elsewhere when its heartbeat is stale) and the
    restart budget and backoff allow a restart, or a crash loop is to be given up on. The task then resumes,
    runs one pass of the watchdog (``ops.watchdog.watch``: the same decision, the restart, the history record)
    and defers again. It ends when the job is stopped on purpose (a stop requested, or STOPPED), and fails
    when it gives up. Its restarts and a scheduled watchdog's share one budget (``max_restarts`` within
    ``window_seconds``): each restart is recorded with who made it, and the give-up counts both. A stuck job (alive, no progress) is left to the scheduled watchdog.

    Takes the arguments of :class:`StreamWatchdogOperator`, and:

    :param poll_seconds: how often the trigger looks at the job (a crash costs up to this much more).
    """

    restarter = SUPERVISOR

    def __init__(self, *, poll_seconds: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.poll_seconds = poll_seconds

    def execute(self, context: Context) -> dict[str, Any]:
        return self._pass_then_defer(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        self.log.info("job %s: the liveness trigger fired: %s", self.job_home, event.get("message"))
        if event.get("status") == ERROR:
            raise JobStateError(f"job {self.job_home}: {event.get('message')}")
        if event.get("status") == STOPPED:
            return {"action": "nothing", "reason": event.get("message"), "supervision": "ended"}
        return self._pass_then_defer(context)

    def _trigger(self) -> StreamJobLivenessTrigger:
        return StreamJobLivenessTrigger(self.job_home, asdict(self.policy), self.storage_conn_id, self.poll_seconds)

    def _pass_then_defer(self, context: Context) -> dict[str, Any]:
        """One watchdog pass here (a give-up raises), then defer unless the job was stopped on purpose."""
        result = super().execute(context)
        trigger = self._trigger()
        look = trigger.poll()
        if look["status"] == STOPPED:
            return {**result, "supervision": "ended"}
        if look["status"] == DUE:
            # Due again at once (the pass found a driver still going, or a race): one more pass here instead of
            # a trigger that fires right after the deferral (apache/airflow#71580).
            result = super().execute(context)
        self.defer(trigger=trigger, method_name="execute_complete")
        return result  # not reached: defer raises
