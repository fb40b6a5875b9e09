"""Upgrade through a warm standby: launch the next version's driver, wait until it is ready, hand over.

The cold upgrade (stop with a savepoint, start the next version) costs a driver start of downtime; a
standby is started while the old version runs, so that only the drain, the savepoint and the query start
remain between the stop request and the new version's first committed batch. The steps, in order:

1. :func:`launch_standby`: refused while another standby is live (two cannot both take over) or while
   the job does not run (a cold submit is the way then); records ``control/standby.json`` (LAUNCHED) and
   starts the driver with :data:`~airflow_kafka_stream.core.standby.STANDBY_ENV` holding its token.
2. :func:`wait_ready`: until the standby reports READY. A standby that fails or is not ready in time is
   ended (:func:`end_standby`) and the upgrade fails before any downtime: the old version keeps running.
3. The caller stops the old version with a savepoint (``ops.stop``) and restores, if asked.
4. :func:`hand_over`: the go for the standby's token. Refused (and the standby ended) when the old
   version was not running when the upgrade asked it to stop, unless the caller says the standby may
   take over a job that stopped by itself.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.standby import STANDBY_ENV
from airflow_kafka_stream.core.status_document import written_state
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.moved import moved_attributes
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.launcher import Launcher, Submission, check_launch
from airflow_kafka_stream.ops.results import StandbyHandle, StopResult
from airflow_kafka_stream.ops.submit import HANDED_OVER, SubmitResult, driver_log_path, log_tail, record_submission
from airflow_kafka_stream.ops.watch import wait
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation
from airflow_kafka_stream.storage.processes import end_process, process_alive

log = logging.getLogger(__name__)


def launch_standby(home: JobHome, submission: Submission, launcher: Launcher, *, by: str | None = None,
                   now: datetime | None = None, rehearse: Mapping[str, Any] | None = None,
                   hot: Mapping[str, Any] | None = None, operation: str = "standby-launch") -> StandbyHandle:
    """Start ``submission``'s driver as a standby of the running job (step 1 of the module docstring); the
    submission is recorded, so a rollback or a watchdog restart later starts this version the same way.

    ``rehearse`` tells the standby's rehearsal of the new query (``runtime/rehearsal.py``) what the upgrade
    will do: ``drop_state``, ``timeout_seconds``, and ``check`` for a compatibility check, which only reports
    (it may run beside a stopped job, and records no submission: it never takes over).
    ``hot``: a hot standby of the running version (``ops.hot_standby``), with the restart policy it judges by.
    """
    now = now or datetime.now(UTC)
    app_version = submission.app_version
    rehearse = dict(rehearse or {})
    check = bool(rehearse.get("check"))
    check_launch(launcher, submission)  # bad input is refused before anything changes
    with recorded_operation(home, operation, {"app_version": app_version, "rehearse": rehearse, "hot": bool(hot)},
                            by=by) as record:
        found = home.standby_record()
        if found and rules.is_live(found, process_alive(found.get("pid"), found.get("host")), now):
            raise JobStateError(
                f"job {home.url} already has a live {rules.describe(found)}: two standbys for one job are refused "
                "(only one can take over). Let its upgrade finish or fail; an abandoned standby ends itself when "
                "its heartbeat stops or its wait for a go times out")
        running, status = job_is_running(home, now)
        if not running and not check:
            raise JobStateError(
                f"job {home.url} does not run (state {written_state(status)}): a standby takes over from a "
                f"running version during an upgrade. Submit version {app_version} instead; nothing was changed")
        token = uuid.uuid4().hex
        driver = launcher.launch(submission, driver_log_path(home, now, prefix="standby-driver"),
                                 {STANDBY_ENV: token})
        handle = StandbyHandle(token, str(app_version), driver.pid, driver.host, driver.log, now.isoformat())
        home.write_standby_record({"state": rules.StandbyState.LAUNCHED, "token": token, "version": str(app_version),
                                            "pid": driver.pid, "host": driver.host, "log": driver.log,
                                            "launched_at": now.isoformat(), "rehearse": rehearse,
                                            **({"hot": dict(hot)} if hot else {})})
        if not check and not hot:  # a hot standby runs the recorded submission
            record_submission(home, submission, now)
        record["before"] = {"state": written_state(status), "version": home.spec().get("version")}
        record["after"] = handle.to_dict()
        log.info("standby of version %s launched for %s: pid %s, log %s", app_version, home.url, driver.pid,
                 driver.log)
        return handle


def look_ready(home: JobHome, handle: StandbyHandle, now: datetime | None = None
               ) -> tuple[rules.ReadyVerdict, dict[str, Any]]:
    """One look at the standby: still coming up, READY, or failed (and why); and its record as read."""
    record = home.standby_record()
    alive = process_alive(handle.pid, handle.host)
    return rules.judge_ready(record, handle.token, alive, now or datetime.now(UTC)), record or {}


def look_standby(home: JobHome, handle: StandbyHandle) -> dict[str, Any]:
    """One look, as every driver of the wait takes it: ``success`` once READY, ``failed`` when it cannot
    become so."""
    verdict, _record = look_ready(home, handle)
    state = {rules.Readiness.READY: WaitStatus.SUCCESS, rules.Readiness.FAILED: WaitStatus.FAILED}.get(
        verdict.outcome, WaitStatus.WAITING)
    return {"status": state, "message": verdict.message}


def conclude_ready(home: JobHome, handle: StandbyHandle, event: Mapping[str, Any], ready_timeout: float,
                   secrets: list[str] | None = None, by: str | None = None) -> StandbyHandle:
    """The end of the wait for READY: the handle, or the standby is ended and JobStateError says why (the
    upgrade failed before any downtime; the old version runs on)."""
    if event.get("status") == WaitStatus.SUCCESS:
        return handle
    why = event.get("message") or "no reason given"
    if event.get("status") == WaitStatus.TIMEOUT:
        why = f"the standby was not ready within {ready_timeout:.0f}s ({event.get('last_look')})"
    raise give_up(home, handle, why, secrets, by=by)


def wait_ready(home: JobHome, handle: StandbyHandle, timeout: float, poll: float = 0.5,
               secrets: list[str] | None = None, by: str | None = None) -> StandbyHandle:
    """The whole wait in this process: the handle once READY, else the standby is ended and JobStateError
    says why."""
    event = wait(lambda: look_standby(home, handle), timeout, poll)
    return conclude_ready(home, handle, event, timeout, secrets, by=by)


def give_up(home: JobHome, handle: StandbyHandle, why: str, secrets: list[str] | None = None,
            by: str | None = None) -> JobStateError:
    """End a standby that did not come up and return the error that says so (to raise): the upgrade failed
    before any downtime, with the end of the standby's log."""
    end_standby(home, handle, why, by=by)
    return JobStateError(
        f"upgrade of {home.url} to version {handle.app_version} failed before any downtime: {why}. The "
        "standby was ended; the old version keeps running untouched (nothing was stopped, no savepoint "
        "taken)", log=handle.driver_log, log_tail=log_tail(handle.driver_log, secrets))


def end_standby(home: JobHome, handle: StandbyHandle, reason: str, by: str | None = None,
                grace_seconds: float = 5.0) -> bool:
    """End a standby that must not take over: a cancel for its token, its process killed where it runs here.

    Returns whether it was still live. Never touches the job's own files.
    """
    with recorded_operation(home, "standby-end", {"reason": reason, "pid": handle.pid}, by=by,
                            lock=False) as record:
        found = home.standby_record() or {}
        ours = found.get("token") == handle.token
        live = ours and found.get("state") in rules.LIVE_STATES
        if ours and found.get("state") == rules.StandbyState.TAKING_OVER:
            raise JobStateError(f"the standby of {home.url} is already taking over (go given at "
                                f"{found.get('go_at')}); stop the job instead of ending the standby")
        home.write_standby_go({"token": handle.token, "action": rules.CANCEL, "by": record["by"],
                                        "reason": reason, "at": datetime.now(UTC).isoformat()})
        if end_process(handle.pid, handle.host, grace_seconds):
            # The cancel was for that process only: once it is gone, it would only be left lying in the job home
            # (an upgrade check leaves nothing there). A standby on another host keeps it: it may still read it.
            home.clear_standby_go()
        if home.remove_rehearsal(handle.token):  # a standby killed mid-rehearsal cannot clean its scratch
            log.info("removed the rehearsal scratch area of the ended standby %s", handle.pid)
        if live:
            home.write_standby_record({**found, "state": rules.StandbyState.ENDED, "error": reason,
                                                "ended_at": datetime.now(UTC).isoformat()})
        record["after"] = {"was_live": live}
        return live


def end_live_standby(home: JobHome, reason: str, by: str | None = None) -> StandbyHandle:
    """End the job's live standby from outside its upgrade (an operator whose upgrade run was abandoned: the
    standby would otherwise hold its driver, and on a cluster its executors, until its own wait times out).

    Refused, with nothing changed, when no standby is live or when it is already taking over.
    """
    home.require()
    handle = live_standby(home)
    if handle is None:
        found = home.standby_record()
        raise JobStateError(f"job {home.url} has no live standby"
                            + (f" (the last one is {found.get('state')})" if found else "")
                            + "; nothing was changed")
    end_standby(home, handle, reason, by=by)
    return handle


def live_standby(home: JobHome, now: datetime | None = None) -> StandbyHandle | None:
    """The job's live standby (launched, ready or taking over, its process not gone), None when none is."""
    found = home.standby_record()
    if not found or not rules.is_live(found, process_alive(found.get("pid"), found.get("host")),
                                      now or datetime.now(UTC)):
        return None
    return StandbyHandle(token=found["token"], app_version=str(found.get("version")), pid=found.get("pid"),
                         host=found.get("host"), driver_log=found.get("log"),
                         launched_at=found.get("launched_at") or found.get("registered_at"))


def hand_over(home: JobHome, handle: StandbyHandle, stopped: StopResult, *, takeover_stopped: bool = False,
              by: str | None = None) -> SubmitResult:
    """Give the standby its go once the old version stopped with a savepoint (step 4 of the module docstring).

    Returns what a submit returns (``submitted_at``, pid, log), so the wait for the new version is the same.
    """
    now = datetime.now(UTC)
    with recorded_operation(home, "standby-go", {"standby_pid": handle.pid, "takeover_stopped": takeover_stopped},
                            by=by) as record:
        if not stopped.was_running and not takeover_stopped:
            reason = (f"the old version was not running when the upgrade asked it to stop (state "
                      f"{stopped.state}: it crashed or another operator stopped it)")
            end_standby(home, handle, reason, by=record["by"])
            raise JobStateError(
                f"upgrade of {home.url} to version {handle.app_version}: {reason}. A standby does not take over a job "
                "that stopped by itself unless told to: it was ended. Find out why the job stopped, then upgrade "
                "again, or allow the takeover (takeover_stopped)", setting="takeover_stopped")
        running, status = job_is_running(home, now)
        if running:
            raise JobStateError(f"job {home.url} still runs (state {written_state(status)}); the standby "
                                "takes over only once the old version has stopped")
        found = home.standby_record() or {}
        verdict = rules.judge_ready(found, handle.token, process_alive(handle.pid, handle.host), now)
        if verdict.outcome is not rules.Readiness.READY:
            raise JobStateError(
                f"the standby of version {handle.app_version} can no longer take over ({verdict.message}); the job "
                f"is stopped (state {written_state(status)}). Start a version with a submit, or roll back")
        home.write_standby_go({"token": handle.token, "action": rules.GO, "by": record["by"], "at": now.isoformat(),
                               "savepoint": stopped.savepoint.id if stopped.savepoint else None})
        result = SubmitResult(HANDED_OVER, "the standby was given the go", handle.app_version, now.isoformat(),
                              handle.pid, handle.driver_log, handle.host)
        record["after"] = result.to_dict()
        return result


#: Moved to ``ops.upgrade_options`` with the upgrade's other defaults.
__getattr__ = moved_attributes(__name__, {
    "HANDOVER_POLL_SECONDS": "airflow_kafka_stream.ops.upgrade_options:HANDOVER_POLL_SECONDS"})
