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
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from airflow.triggers.base import TriggerEvent

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.ops.watch import timed_out


class PollingTrigger(Protocol):
    #: None: no deadline (a watch that lasts until the look says otherwise).
    timeout_seconds: float | None
    poll_seconds: float

    def poll(self) -> dict[str, Any]: ...


async def poll_until_done(trigger: PollingTrigger, log: Callable[..., None], subject: str, reading: str,
                          on_error: Mapping[str, Any] | None = None) -> AsyncIterator[TriggerEvent]:
    """Yield exactly one event: the first look that is not waiting, a look that failed (``error``), or the
    timeout. A waiting look's message is logged when it changed (a line per change, not per look).

    ``subject`` names what is awaited in the log lines, ``reading`` what a failed look could not read;
    ``on_error`` adds fields to the error event (what the task reading it expects beside the message).
    """
    deadline = None if trigger.timeout_seconds is None else time.monotonic() + trigger.timeout_seconds
    said = None
    while True:
        try:
            event = await asyncio.to_thread(trigger.poll)
        except Exception as exc:  # noqa: BLE001 - a failed look ends the wait with its message
            yield TriggerEvent({"status": WaitStatus.ERROR, "message": f"cannot read {reading}: {exc}",
                                "job": {"state": None}, **(on_error or {})})
            return
        if event["status"] != WaitStatus.WAITING:
            log("%s: %s", subject, event.get("message"))
            yield TriggerEvent(event)
            return
        if deadline is not None and time.monotonic() >= deadline:
            yield TriggerEvent(timed_out(event, float(trigger.timeout_seconds)))
            return
        if event.get("message") != said:
            log("%s: %s", subject, event.get("message"))
            said = event.get("message")
        await asyncio.sleep(trigger.poll_seconds)
