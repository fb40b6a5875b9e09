"""How the operators wait: a short while in their worker slot, then deferred to the triggerer.

Most waits of a stop or of an upgrade's start end within seconds (one micro-batch, a standby's handover).
Deferring those costs a defer and resume round trip, which in an upgrade is downtime, and exposes the task
to Airflow's race between a deferral's exit and a trigger that fires at once (apache/airflow#71580: the
resumed task is failed as "state changed externally"). So a deferrable operator first polls the same
trigger here for ``defer_after_seconds`` and defers only the rest of a wait that is still going on.
"""

from __future__ import annotations

from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator, Context

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.ops.watch import look_for, timed_out
from airflow_kafka_stream.triggers.polling import PollingTrigger

#: Seconds a deferrable operator waits in its slot before it defers, unless told otherwise.
DEFAULT_DEFER_AFTER_SECONDS = 30.0


def defer_after(value: float | str | None) -> float:
    """The operator's ``defer_after_seconds``, else ``[airflow_kafka_stream] defer_after_seconds``, else 30."""
    if value is None:
        value = conf.get("airflow_kafka_stream", "defer_after_seconds", fallback=None)
    if value is None or value == "":
        return DEFAULT_DEFER_AFTER_SECONDS
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:
        raise InvalidInputError(f"defer_after_seconds must be a number of seconds >= 0, got {value!r} (0 defers "
                                "after one look; set it on the operator or in [airflow_kafka_stream] of airflow.cfg)")
    return seconds


def wait_then_defer(operator: BaseOperator, context: Context, trigger: PollingTrigger, method_name: str,
                    kwargs: dict[str, Any], defer_after_seconds: float) -> Any:
    """End the wait with ``operator.<method_name>(context, event, **kwargs)``: here when it is over within
    ``defer_after_seconds`` (the whole timeout for an operator that does not defer), else deferred with the
    time that is left."""
    deferrable = bool(getattr(operator, "deferrable", False))
    limit = min(defer_after_seconds, trigger.timeout_seconds) if deferrable else trigger.timeout_seconds
    event, spent = look_for(trigger.poll, limit, trigger.poll_seconds)
    if event["status"] == WaitStatus.WAITING:
        left = trigger.timeout_seconds - spent
        if deferrable and left > 0:
            operator.log.info("still waiting after %.0fs (%s); deferring the rest (%.0fs) to the triggerer",
                              spent, event.get("message"), left)
            trigger.timeout_seconds = left
            operator.defer(trigger=trigger, method_name=method_name, kwargs=kwargs)
        event = timed_out(event, trigger.timeout_seconds)
    return getattr(operator, method_name)(context, event, **kwargs)
