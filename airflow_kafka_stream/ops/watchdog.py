"""The watchdog's run: observe the job, decide with ``core.watchdog``, restart it if it must.

A restart starts the running version again exactly as it was last submitted
(``ops.submit.replay``) through the caller's launcher: ``spark-submit`` from the
command line, ``SparkSubmitHook`` from Airflow. This module observes, keeps the
watchdog's own memory (since when the last committed batch has not moved), stops
a stuck driver, and records every restart and every give-up in the history.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.failover import FAILOVER_GRACE_SECONDS
from airflow_kafka_stream.core.standby import StandbyState, hot_policy
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.submit_rules import launch_pending
from airflow_kafka_stream.core.watchdog import (
    DELIBERATE,  # noqa: F401 - still importable from here
    RESTART_CAUSE,
    RESTART_OPERATION,
    RESTARTERS,
    WATCHDOG,
    Action,
    Decision,
    Policy,
    Progress,
    Restart,
    decide,
    restarts_in,
)
from airflow_kafka_stream.errors import JobStateError, OperationIncompleteError, WatchdogGaveUp
from airflow_kafka_stream.ops.guard import GIVE_UP_OPERATION
from airflow_kafka_stream.ops.health import job_lag
from airflow_kafka_stream.ops.hot_standby import align_policy, is_hot, keep_hot_standby
from airflow_kafka_stream.ops.launcher import Launcher
from airflow_kafka_stream.ops.results import WatchdogResult
from airflow_kafka_stream.ops.standby import live_standby
from airflow_kafka_stream.ops.submit import LAUNCHED, replay
from airflow_kafka_stream.storage.jobhome import STOP_MODE_KILL, JobHome
from airflow_kafka_stream.storage.operation import recorded_operation
from airflow_kafka_stream.storage.processes import driver_gone, end_process, process_alive
from airflow_kafka_stream.storage.status import max_heartbeat_age, observe_liveness

log = logging.getLogger(__name__)

#: The cause a restart's submit records (``core.watchdog.RESTART_CAUSE``).
CAUSE = RESTART_CAUSE


def restarts_in_history(home: JobHome) -> list[Restart]:
    """When, and by whom, the job was restarted since the last deliberate operation (``core.watchdog.restarts_in``):
    the one budget the watchdog, the supervisor and a hot standby's failover use."""
    return restarts_in(home.history())


def starting_driver(home: JobHome, status: StatusDocument | None, now: datetime) -> str | None:
    """What says a driver was launched (a submit, a restart) and has not reported yet, or that a live hot
    standby is taking a dead driver's job over (``failover_pending``); None when none is."""
    pending = failover_pending(home, status, now)
    if pending:
        return pending
    record = home.launch_record()
    if not launch_pending(status, record, process_alive((record or {}).get("pid"), (record or {}).get("host")), now):
        return None
    assert record is not None
    return (f"a driver of version {record.get('app_version')} was launched at {record.get('launched_at')} "
            f"(pid {record.get('pid')}) and has not reported yet: it is starting")


def failover_pending(home: JobHome, status: StatusDocument | None, now: datetime) -> str | None:
    """What says the job's live hot standby takes its dead driver's job over: it is taking over, or READY and the
    driver's last heartbeat is recent enough that the standby will act (``core.failover.FAILOVER_GRACE_SECONDS``
    past the liveness limit); None otherwise, and then the watchdog and the supervisor restart the job."""
    record = home.standby_record()
    if not is_hot(record) or live_standby(home, now) is None or status is None:
        return None
    state = record.get("state")
    if state == StandbyState.TAKING_OVER:
        return f"the hot standby (pid {record.get('pid')}) is taking the job over"
    floor = hot_policy(record["hot"]).max_heartbeat_age
    if state != StandbyState.READY or observe_liveness(status, now, floor).alive:
        return None
    age = status.heartbeat_age(now)
    if age is not None and age <= FAILOVER_GRACE_SECONDS + max_heartbeat_age(status, floor):
        return f"the driver is dead; the job's hot standby (pid {record.get('pid')}) is READY and takes it over"
    return None


def assess(home: JobHome, policy: Policy, *, now: datetime | None = None, lag: int | None = None,
           previous: Progress | None = None,
           status: Mapping[str, Any] | StatusDocument | None = None) -> Decision:
    """Observe the job and decide (``core.watchdog.decide``), changing nothing: liveness by the one rule (a
    driver gone from this host is dead at once), the restarts since the last deliberate operation, a stop
    request, a driver that is starting. Without ``lag`` and ``previous`` only death is judged, not a stuck job.
    ``status``: the status already read (raw or parsed; an empty one is none), None to read it here."""
    now = now or datetime.now(UTC)
    document = home.status_document() if status is None else StatusDocument.of(status)
    return decide(document, stop_requested=home.stop_requested(), restarts=restarts_in_history(home),
                  previous=previous, lag=lag, now=now, policy=policy, processes_gone=driver_gone(document),
                  starting=starting_driver(home, document, now))


def watch(home: JobHome, kafka_config: Mapping[str, Any] | None, policy: Policy, launcher: Launcher, *,
          now: datetime | None = None, by: str | None = None, kill_timeout: float = 60.0,
          restarter: str = WATCHDOG) -> WatchdogResult:
    """One watchdog run: restart a dead or stuck job through ``launcher`` within the policy's limits, never a
    stopped one. Raises JobStateError when it gives up on a crash loop.

    ``restarter``: who runs this pass, the watchdog or the supervisor (``core.watchdog.RESTARTERS``); each
    restart records it, and the give-up counts the shared budget's restarts by each."""
    if restarter not in RESTARTERS:
        raise ValueError(f"restarter must be one of {', '.join(RESTARTERS)}, got {restarter!r}")
    now = now or datetime.now(UTC)
    document = home.status_document()
    lag = job_lag(kafka_config, document)
    memory = home.watchdog_memory()
    previous = Progress.from_dict(memory) if memory else None
    decision = assess(home, policy, now=now, lag=lag, previous=previous, status=document or {})
    if decision.progress is not None:
        home.write_watchdog_memory(decision.progress.to_dict())
    log.info("watchdog %s: %s (%s)", home.url, decision.action, decision.reason)
    if decision.action in (Action.NOTHING, Action.WAIT_BACKOFF):
        if decision.action is Action.NOTHING and not decision.stopped_on_purpose:
            align_policy(home, policy)
            keep_hot_standby(home, launcher, by=by)  # the job wants one and has none: a failover used it
        return WatchdogResult(decision.action.value, decision.reason, lag)
    if decision.action is Action.GIVE_UP:
        with recorded_operation(home, GIVE_UP_OPERATION, {"reason": decision.reason, "restarter": restarter},
                                by=by, lock=False) as record:
            record["result"] = "failed"
            record["error"] = decision.reason
        raise WatchdogGaveUp(f"job {home.url}: {decision.reason}")
    # The runtime does not write app_version into status.json: the version is job.json's.
    version = str((document.app_version if document else None) or home.spec().get("version") or "")
    args = {"reason": decision.reason, "action": decision.action.value, "version": version, "restarter": restarter}
    # Not under the job lock: the restart's submit takes it (and so does the new driver's start).
    with recorded_operation(home, RESTART_OPERATION, args, by=by, lock=False) as record:
        if decision.action is Action.KILL_AND_RESTART:
            _stop_at_once(home, record["by"], kill_timeout)
        if not version:
            raise JobStateError(f"job {home.url} records no application version to restart; submit it again",
                                setting="app_version")
        started = replay(home, version, launcher, by=record["by"], cause=CAUSE,
                         max_heartbeat_age=policy.max_heartbeat_age)
        record["after"] = started.to_dict()
        if started.action != LAUNCHED:  # a driver came back meanwhile: nothing was restarted
            record["result"] = "skipped"
            return WatchdogResult(Action.NOTHING.value, f"{decision.reason}; but {started.reason}", lag, started)
    return WatchdogResult(decision.action.value, decision.reason, lag, started)


def _stop_at_once(home: JobHome, by: str, kill_timeout: float) -> None:
    """Stop a stuck driver: the kill request first (its batch re-runs on restart), then SIGKILL on this host."""
    home.request_stop(by, mode=STOP_MODE_KILL)
    deadline = time.monotonic() + kill_timeout
    while time.monotonic() < deadline:
        found = home.status_document()
        if found is not None and found.is_final:
            return
        time.sleep(1.0)
    status = home.status_document()
    pid, host = (status.pid, status.host) if status else (None, None)
    if status is not None and host == socket.gethostname() and pid is not None and pid > 0:
        log.warning("job %s: the stuck driver (pid %s) did not answer the kill request; sending SIGKILL", home.url, pid)
        end_process(pid, host, grace_seconds=0.0, group=False)
        # The driver can no longer say how it ended: record it, so nothing mistakes it for a live one.
        home.mark_driver_killed(status.to_dict(), f"killed by the watchdog (pid {pid}): stuck")
        return
    raise OperationIncompleteError(
        f"job {home.url}: the stuck driver did not answer the kill request within {kill_timeout:.0f}s and runs on "
        f"{host} (pid {pid}): kill it there; the request stays in control/stop")
