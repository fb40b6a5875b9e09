"""Watch, in the triggerer, a running job's liveness, and fire as soon as a restart is due.

The supervisor task (``operators/supervisor.py``) defers to this trigger between
watchdog passes, so no worker slot is held while the job runs. Each look is
``ops.watchdog.assess``: the one liveness rule (a driver gone from this host is
dead at once, one elsewhere by its heartbeat age) and the watchdog's limits
(the restart budget, the backoff), changing nothing. The trigger fires when the
watchdog would act (restart, or give up on a crash loop), when the job wants a
hot standby and has none (``ops.hot_standby``: the pass launches one), and when
the job was stopped on purpose (the supervision ends); while the job runs, starts, or waits
out a backoff, it keeps looking. Stuck jobs (alive, no progress) are the
scheduled watchdog's: judging them needs Kafka and the watchdog's memory.

It keeps only serializable arguments (the job home, a storage connection id, the
policy as a dict), reads storage off the event loop and may run more than once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.watchdog import Action, Policy
from airflow_kafka_stream.triggers.polling import poll_until_done

# Lazy imports: hooks.stream_job and ops.watchdog (confluent-kafka, the Kafka provider, checkpoint) wait for a
# poll, so the triggerer and a DAG file's parse do not load them with the trigger.

#: Event statuses: the watchdog must act (restart or give up); the job was stopped on purpose; a look failed.
DUE, STOPPED, ERROR = "due", "stopped", WaitStatus.ERROR


class StreamJobLivenessTrigger(BaseTrigger):
    """Yield one event when the job needs the watchdog (dead, within the restart limits, or a crash loop to give
    up on), was stopped on purpose, or cannot be read.

    :param job_home: the job's home directory (path or URL).
    :param policy: the watchdog policy as keyword arguments of ``core.watchdog.Policy``.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param poll_seconds: how often to look.
    """

    def __init__(self, job_home: str, policy: dict[str, Any], storage_conn_id: str | None = None,
                 poll_seconds: float = 1.0) -> None:
        super().__init__()
        self.job_home = job_home
        self.policy = dict(policy)
        self.storage_conn_id = storage_conn_id
        self.poll_seconds = poll_seconds
        self.timeout_seconds = None  # it watches until the job needs the watchdog or was stopped

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"job_home": self.job_home, "policy": self.policy, "storage_conn_id": self.storage_conn_id,
                 "poll_seconds": self.poll_seconds})

    def poll(self) -> dict[str, Any]:
        """One look (blocking: it reads the job home): an event dict whose status is ``waiting`` until the
        watchdog must act (``due``) or the job was stopped on purpose (``stopped``)."""
        from airflow_kafka_stream.hooks.stream_job import StreamJobHook
        from airflow_kafka_stream.ops.hot_standby import due
        from airflow_kafka_stream.ops.watchdog import assess

        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        decision = assess(home, Policy(**self.policy))
        message = decision.reason
        if decision.stopped_on_purpose:
            status = STOPPED
        elif decision.action in (Action.RESTART, Action.KILL_AND_RESTART, Action.GIVE_UP):
            status = DUE
        elif decision.action is Action.NOTHING and (relaunch := due(home)) is not None and relaunch.due:
            status, message = DUE, f"the job wants a hot standby: {relaunch.reason}"
        else:
            status = WaitStatus.WAITING
        return {"status": status, "action": decision.action.value, "message": message}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        async for event in poll_until_done(self, self.log.info, f"job {self.job_home}", f"job {self.job_home}",
                                           on_error={"action": None}):
            yield event
