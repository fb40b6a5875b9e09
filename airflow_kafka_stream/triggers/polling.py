"""The loop every polling trigger of this package runs, and its twin for a wait in a worker slot.

A polling trigger has a blocking ``poll()`` that looks once and returns an event dict whose ``status`` is
``waiting`` until the wait is over, and ``timeout_seconds`` and ``poll_seconds``. The triggerer runs
:func:`poll_until_done` (each look off the event loop); an operator runs ``ops.watch.look_for`` for a short
while before it defers, so a wait that ends within seconds (a drain, a standby's handover) ends there: no
defer and resume round trip in an upgrade's downtime, and no trigger that fires while the scheduler still
holds the deferral's exit (apache/airflow#71580: such a task can be failed as it resumes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from airflow.triggers.base import TriggerEvent

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.ops.watch import timed_out


class PollingTrigger(Protocol):
    timeout_seconds: float
    poll_seconds: float

    def poll(self) -> dict[str, Any]: ...


async def poll_until_done(trigger: PollingTrigger, log: Callable[..., None], subject: str, reading: str
                          ) -> AsyncIterator[TriggerEvent]:
    """Yield exactly one event: the first look that is not waiting, a storage error, or the timeout.

    ``subject`` names what is awaited in the log lines, ``reading`` what a failed look could not read.
    """
    deadline = time.monotonic() + trigger.timeout_seconds
    while True:
        try:
            event = await asyncio.to_thread(trigger.poll)
        except Exception as exc:  # noqa: BLE001 - a storage error ends the wait with its message
            yield TriggerEvent({"status": "error", "message": f"cannot read {reading}: {exc}",
                                "job": {"state": None}})
            return
        if event["status"] != WaitStatus.WAITING:
            yield TriggerEvent(event)
            return
        if time.monotonic() >= deadline:
            yield TriggerEvent(timed_out(event, trigger.timeout_seconds))
            return
        log("%s: %s", subject, event.get("message"))
        await asyncio.sleep(trigger.poll_seconds)
