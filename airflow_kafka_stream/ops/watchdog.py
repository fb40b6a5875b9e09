"""The watchdog's run: observe the job, decide with ``core.watchdog``, restart it if it must.

The restart itself is the caller's (``restart(home, version)`` starts the
version recorded in job.json again, e.g. through the Airflow submit path);
this module observes, keeps the watchdog's own memory (``control/watchdog.json``:
since when the last committed batch has not moved), stops a stuck driver,
and records every restart and every give-up in the history.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.job_watch import FAILED, STOPPED
from airflow_kafka_stream.core.watchdog import Action, Decision, Policy, Progress, decide
from airflow_kafka_stream.errors import JobStateError, OperationIncompleteError, StreamError
from airflow_kafka_stream.storage.files import dump_json, read_json, write_atomic
from airflow_kafka_stream.storage.jobhome import STOP_MODE_KILL, JobHome
from airflow_kafka_stream.storage.operation import recorded_operation
from airflow_kafka_stream.storage.processes import driver_gone, process_alive

log = logging.getLogger(__name__)

MEMORY = ("control", "watchdog.json")
RESTART_OPERATION = "watchdog-restart"
CAUSE = "watchdog"


@dataclass(frozen=True)
class WatchdogResult:
    action: str
    reason: str
    lag: int | None = None
    restarted: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Operations that start a new chapter: a deliberate submit, stop, restore or reset resets the restart budget.
DELIBERATE = ("submit", "stop", "restore", "reset")


def restarts_in_history(home: JobHome) -> list[datetime]:
    """When the watchdog restarted the job since the last deliberate operation (successful restarts only)."""
    found: list[datetime] = []
    for record in home.history():
        args = record.get("args") or {}
        if record.get("operation") in DELIBERATE and record.get("result") == "ok" and args.get("cause") != CAUSE:
            if record.get("operation") != "submit" or (record.get("after") or {}).get("action") == "launched":
                found = []
            continue
        if record.get("operation") == RESTART_OPERATION and record.get("result") == "ok":
            try:
                found.append(datetime.fromisoformat(record["started_at"]))
            except (KeyError, ValueError):
                continue
    return found


def job_lag(kafka_config: Mapping[str, Any] | None, status: Mapping[str, Any] | None) -> int | None:
    """Total lag behind the high watermarks of the job's partitions; None when it cannot be known."""
    offsets = (status or {}).get("last_offsets")
    if not kafka_config or not offsets:
        return None
    from airflow_kafka_stream.core.health import total_lag
    from airflow_kafka_stream.core.offsets import TopicPartition
    from airflow_kafka_stream.kafka.metadata import watermarks

    try:
        found = watermarks(kafka_config, [TopicPartition(t, int(p)) for t, parts in offsets.items() for p in parts])
    except StreamError as exc:
        log.warning("cannot read the watermarks for the lag: %s", exc)
        return None
    return total_lag(offsets, {(tp.topic, tp.partition): high for tp, (_low, high) in found.items()})


def starting_driver(home: JobHome, status: Mapping[str, Any] | None, now: datetime) -> str | None:
    """What says a driver was launched (a submit, a restart) and has not reported yet; None when none is."""
    from airflow_kafka_stream.core.submit_rules import launch_pending
    from airflow_kafka_stream.ops.submit import launch_record

    record = launch_record(home)
    if not launch_pending(status, record, process_alive((record or {}).get("pid"), (record or {}).get("host")), now):
        return None
    assert record is not None
    return (f"a driver of version {record.get('app_version')} was launched at {record.get('launched_at')} "
            f"(pid {record.get('pid')}) and has not reported yet: it is starting")


def assess(home: JobHome, policy: Policy, *, now: datetime | None = None, lag: int | None = None,
           previous: Progress | None = None, status: Mapping[str, Any] | None = None) -> Decision:
    """Observe the job and decide (``core.watchdog.decide``), changing nothing: liveness by the one rule (a
    driver gone from this host is dead at once), the restarts since the last deliberate operation, a stop
    request, a driver that is starting. Without ``lag`` and ``previous`` only death is judged, not a stuck job."""
    now = now or datetime.now(UTC)
    if status is None:
        status = home.status()
    return decide(status, stop_requested=home.stop_requested(), restarts=restarts_in_history(home),
                  previous=previous, lag=lag, now=now, policy=policy, processes_gone=driver_gone(status),
                  starting=starting_driver(home, status, now))


def watch(home: JobHome, kafka_config: Mapping[str, Any] | None, policy: Policy,
          restart: Callable[[JobHome, str], dict[str, Any]], *, now: datetime | None = None, by: str | None = None,
          kill_timeout: float = 60.0) -> WatchdogResult:
    """One watchdog run. Raises JobStateError when it gives up on a crash loop."""
    now = now or datetime.now(UTC)
    status = home.status()
    lag = job_lag(kafka_config, status)
    try:
        previous = Progress.from_dict(read_json(home.fs, home.p(*MEMORY)))
    except ValueError:
        previous = None
    decision = assess(home, policy, now=now, lag=lag, previous=previous, status=status or {})
    if decision.progress is not None:
        write_atomic(home.fs, home.p(*MEMORY), dump_json(decision.progress.to_dict()))
    log.info("watchdog %s: %s (%s)", home.url, decision.action, decision.reason)
    if decision.action in (Action.NOTHING, Action.WAIT_BACKOFF):
        return WatchdogResult(decision.action.value, decision.reason, lag)
    if decision.action is Action.GIVE_UP:
        with recorded_operation(home, "watchdog-give-up", {"reason": decision.reason}, by=by, lock=False) as record:
            record["result"] = "failed"
            record["error"] = decision.reason
        raise JobStateError(f"job {home.url}: {decision.reason}")
    version = str((status or {}).get("app_version") or home.spec().get("version") or "")
    args = {"reason": decision.reason, "action": decision.action.value, "version": version}
    # Not under the job lock: the restart's submit takes it (and so does the new driver's start).
    with recorded_operation(home, RESTART_OPERATION, args, by=by, lock=False) as record:
        if decision.action is Action.KILL_AND_RESTART:
            _stop_at_once(home, record["by"], kill_timeout)
        started = restart(home, version)
        record["after"] = started
        if started.get("action") != "launched":  # a driver came back meanwhile: nothing was restarted
            record["result"] = "skipped"
            return WatchdogResult(Action.NOTHING.value, f"{decision.reason}; but {started.get('reason')}", lag, started)
    return WatchdogResult(decision.action.value, decision.reason, lag, started)


def _stop_at_once(home: JobHome, by: str, kill_timeout: float) -> None:
    """Stop a stuck driver: the kill request first (its batch re-runs on restart), then SIGKILL on this host."""
    home.request_stop(by, mode=STOP_MODE_KILL)
    deadline = time.monotonic() + kill_timeout
    while time.monotonic() < deadline:
        if (home.status() or {}).get("state") in (STOPPED, FAILED):
            return
        time.sleep(1.0)
    status = home.status() or {}
    pid = status.get("pid")
    if status.get("host") == socket.gethostname() and isinstance(pid, int) and pid > 0:
        log.warning("job %s: the stuck driver (pid %s) did not answer the kill request; sending SIGKILL", home.url, pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _wait_gone(pid, 15.0)
        # The driver can no longer say how it ended: record it, so nothing mistakes it for a live one.
        ended = {**status, "state": FAILED, "error": f"killed by the watchdog (pid {pid}): stuck",
                 "stopped_at": datetime.now(UTC).isoformat()}
        write_atomic(home.fs, home.p("status.json"), dump_json(ended))
        return
    raise OperationIncompleteError(
        f"job {home.url}: the stuck driver did not answer the kill request within {kill_timeout:.0f}s and runs on "
        f"{status.get('host')} (pid {pid}): kill it there; the request stays in control/stop")


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
