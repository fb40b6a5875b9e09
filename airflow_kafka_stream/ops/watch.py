"""The "look" phase of every long operation, and the loop that repeats it.

A long operation is one phased machine: *request* (start a driver, ask for a stop), *look* until the job
shows the outcome, *conclude* (the result, or the next request). The looks live here, once: each returns an
event dict whose ``status`` is ``waiting`` until the wait is over, then ``success``, ``failed`` or
``error``, with a ``message`` and the job's ``summary``. Three drivers run the same looks:

* the command line: :func:`wait`, looking every ``poll_seconds`` until the timeout;
* an operator in its worker slot: :func:`look_for` for a short while before it defers;
* a trigger in the triggerer: the same look off the event loop (``triggers.polling``).

Whoever drives it, the request and the conclusion are the operation's own functions in ``ops/``, so the
job lock and the history records are the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.job_watch import WaitStatus, WatchSpec, judge, summary
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.moved import moved_attributes
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.processes import driver_gone, process_alive

Look = Callable[[], dict[str, Any]]


def look_job(home: JobHome, spec: WatchSpec, driver_pid: int | None = None, driver_host: str | None = None,
             now: datetime | None = None) -> dict[str, Any]:
    """One look at the job's status against ``spec`` (``core.job_watch``'s rules).

    With the pid of a driver just launched here, a driver that exited before the job reported what is awaited
    (a broken application that never writes a status) fails the wait at once.
    """
    status = home.status_document()
    now = now or datetime.now(UTC)
    verdict = judge(status, spec, now, driver_gone(status))
    if not verdict.done and process_alive(driver_pid, driver_host) is False:
        status = home.status_document()  # it may have reported just before exiting
        verdict = judge(status, spec, now, driver_gone(status))
        if not verdict.done:
            newer = spec.newer_than.isoformat() if spec.newer_than else None
            return {"status": WaitStatus.FAILED, "job": summary(status, now, driver_gone(status)), "message": (
                f"the driver process (pid {driver_pid}) exited before the job reported "
                f"{'/'.join(sorted(spec.target_states))}; {status_shows(status, newer)}")}
    return {"status": verdict.outcome, "message": verdict.message, "job": summary(status, now, driver_gone(status))}


def status_shows(status: Mapping[str, Any] | StatusDocument | None, newer_than: str | None) -> str:
    """What the job's status says, in words, when a driver exited before it reported (it never wrote one)."""
    document = StatusDocument.of(status)
    if document is None:
        return "the job home has no status: the driver never reported"
    started = document.started_text
    try:
        earlier = bool(newer_than) and datetime.fromisoformat(str(started)) < datetime.fromisoformat(str(newer_than))
    except ValueError:
        earlier = bool(newer_than)
    whose = "a previous driver's" if earlier else "this driver's"
    return f"the job's status still shows {document.state_text}, {whose} (started {started})"


def timed_out(last: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The event that ends a wait which ran out of time, saying what the last look saw (also alone, as
    ``last_look``)."""
    return {**last, "status": WaitStatus.TIMEOUT, "message": f"gave up after {seconds:.0f}s: {last.get('message')}",
            "last_look": last.get("message")}


def look_for(look: Look, seconds: float, poll_seconds: float) -> tuple[dict[str, Any], float]:
    """Look until the wait is over or ``seconds`` have passed (at least one look); returns the last event
    (``waiting`` when time ran out) and the seconds spent."""
    started = time.monotonic()
    while True:
        event = look()
        spent = time.monotonic() - started
        if event["status"] != WaitStatus.WAITING or spent + poll_seconds > seconds:
            return event, spent
        time.sleep(poll_seconds)


def wait(look: Look, timeout: float, poll_seconds: float,
         progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The whole wait in this process (the command line's driver): the first event that is not waiting, or
    the timeout event. ``progress`` sees every waiting look (a verbose CLI logs it)."""
    deadline = time.monotonic() + timeout
    while True:
        event = look()
        if event["status"] != WaitStatus.WAITING:
            return event
        if time.monotonic() >= deadline:
            return timed_out(event, timeout)
        if progress is not None:
            progress(event)
        time.sleep(min(poll_seconds, max(0.05, deadline - time.monotonic())))


#: The wait statuses are ``core.job_watch.WaitStatus``; the constants that were here keep working, warned.
__getattr__ = moved_attributes(__name__, {name: f"airflow_kafka_stream.core.job_watch:WaitStatus.{name}"
                                          for name in ("WAITING", "SUCCESS", "FAILED", "TIMEOUT")})
