"""Upgrade a streaming job with a health gate and a rollback: the decisions, and the whole run for a terminal.

observe → decide → act, one phase after the other in the order of ``ops.upgrade_phases.UpgradePhase``; the
Airflow task group (``operators.upgrade``) runs the same phases as tasks named for them, and its ``outcome`` task asks :func:`decide_outcome`, so a DAG and the command line
reach the same outcome and write the same history records:

0. With ``standby`` (default) and a running job, the new version comes up beside the old one as a warm
   standby (``ops.standby``) and rehearses its own query on a private copy of the job's state
   (``runtime/rehearsal.py``). If the rehearsal finds it incompatible, or it is not READY in time, it is
   ended and the upgrade fails before any downtime: the old version keeps running, never asked to stop.
1. The old version stops with a savepoint, pinned (kept out of housekeeping) because a rollback needs it.
   If this fails, nothing changed.
2. With ``drop_state``, a new checkpoint generation seeded at the savepoint's offsets.
3. The new version starts: the standby's go, or a cold submit; it must report RUNNING.
4. The health gate: it runs, commits ``health_batches`` batches and does not fall behind for
   ``health_window_seconds`` (``core.health``).
5. If 3 or 4 fails and ``rollback`` is on: the new version is stopped (at once if need be), a generation is
   restored from the savepoint (state included) and the previous version is started exactly as it was last
   submitted (``ops.submit.replay``).
6. The outcome: the savepoint is unpinned once the upgrade is decided; a standby that never got its go is
   ended; a failure says where the upgrade failed and whether the previous version runs again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core import standby as standby_rules
from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.status_document import written_state
from airflow_kafka_stream.core.upgrade_outcome import UpgradeVerdict, judge_upgrade
from airflow_kafka_stream.errors import JobStateError, OperationIncompleteError, StreamError
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.health import HealthLook
from airflow_kafka_stream.ops.hot_standby import end_hot_standby, keep_hot_standby
from airflow_kafka_stream.ops.launcher import Launcher, Submission
from airflow_kafka_stream.ops.results import StopResult, UpgradeOutcome
from airflow_kafka_stream.ops.savepoints import restore, unpin
from airflow_kafka_stream.ops.standby import (
    StandbyHandle,
    end_standby,
    hand_over,
    launch_standby,
    live_standby,
    wait_ready,
)
from airflow_kafka_stream.ops.stop import stop_job
from airflow_kafka_stream.ops.submit import SubmitResult, conclude_start, look_started, replay, submit
from airflow_kafka_stream.ops.upgrade_options import UpgradeOptions, stop_poll_seconds
from airflow_kafka_stream.ops.upgrade_phases import UpgradePhase
from airflow_kafka_stream.ops.watch import wait
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)


class UpgradeFailed(OperationIncompleteError):
    """An upgrade that failed after the downtime began: the job changed (rolled back, or left as it is) and the
    message says what runs now. The command line exits 1 for it, not 2: something was changed."""


def pin_reason(new_version: str) -> str:
    return f"upgrade to version {new_version} may roll back to it"


def savepoint_of(stopped: StopResult | None) -> str | None:
    """The savepoint the old version stopped with; None when the upgrade failed before it (nothing changed,
    nothing to roll back)."""
    return stopped.savepoint.id if stopped is not None and stopped.savepoint else None


def end_unused_standby(home: JobHome, handle: StandbyHandle | None) -> bool:
    """End a standby that never got its go (the stop or the handoff failed): it must not wait on. Returns
    whether one was ended."""
    if handle is None:
        return False
    record = home.standby_record()
    if not record or record.get("token") != handle.token:
        return False
    state = record.get("state")
    if state in standby_rules.LIVE_STATES and state != standby_rules.StandbyState.TAKING_OVER:
        end_standby(home, handle, "the upgrade ended without handing the job over to it")
        log.warning("ended the standby of version %s (pid %s): it never got its go", handle.app_version, handle.pid)
        return True
    return False


def rehearsal_of(home: JobHome, handle: StandbyHandle | None) -> dict[str, Any] | None:
    """What the standby's rehearsal reported (kept in its record after it took over), None without a standby."""
    if handle is None:
        return None
    record = home.standby_record() or {}
    return record.get("rehearsal") if record.get("token") == handle.token else None


def decide_outcome(home: JobHome, new_version: str, stopped: StopResult | None,
                   healthy: Mapping[str, Any] | None, rolled_back: Mapping[str, Any] | None, rollback: bool,
                   standby: StandbyHandle | None = None) -> UpgradeOutcome:
    """Decide the upgrade from what its steps returned (step 6): the outcome when the new version is healthy,
    else the error that says where it failed and whether the previous version runs again."""
    end_unused_standby(home, standby)
    savepoint = savepoint_of(stopped)
    previous = stopped.app_version if stopped is not None else None
    verdict = judge_upgrade(stopped_with_savepoint=savepoint is not None, healthy=bool(healthy),
                            rolled_back=bool(rolled_back), rollback=rollback)
    if verdict.unpins_savepoint:
        unpin(home, str(savepoint))
    where = home.url
    if verdict is UpgradeVerdict.NOTHING_CHANGED:
        raise JobStateError(f"upgrade of {where} to version {new_version} failed before any downtime: the new "
                            "version's standby did not become ready, or the old version did not stop with a "
                            "savepoint; the old version keeps running (see the standby and stop steps)")
    if verdict is UpgradeVerdict.UPGRADED:
        log.info("upgrade of %s to version %s succeeded: %s", where, new_version, healthy.get("message"))
        return UpgradeOutcome(True, str(new_version), savepoint, healthy.get("message"), previous,
                              rehearsal_of(home, standby))
    if verdict is UpgradeVerdict.ROLLED_BACK:
        raise UpgradeFailed(
            f"upgrade of {where} to version {new_version} failed its start or health gate and was rolled back: "
            f"version {previous} runs again from savepoint {savepoint} (generation {rolled_back.get('generation')})")
    if verdict is UpgradeVerdict.LEFT_AS_IS:
        raise UpgradeFailed(
            f"upgrade of {where} to version {new_version} failed its start or health gate; rollback is off, so the "
            f"new version is left as it is. Savepoint {savepoint} (kept pinned) holds the previous version "
            f"{previous}'s position: restore it and submit that version to roll back by hand")
    raise UpgradeFailed(
        f"upgrade of {where} to version {new_version} failed and the rollback did not complete: savepoint "
        f"{savepoint} (kept pinned) holds the previous version's position. Retry the rollback, or restore that "
        "savepoint and submit the previous version by hand")


def upgrade(home: JobHome, new: Submission, launcher: Launcher, kafka_config: Mapping[str, Any],
            options: UpgradeOptions | None = None, *, secrets: list[str] | None = None, by: str | None = None,
            say: Callable[[str], None] = log.info,
            enter: Callable[[UpgradePhase], None] = lambda phase: None) -> UpgradeOutcome:
    """The whole upgrade in this process (the command line's driver), phase by phase in the order of
    ``ops.upgrade_phases``: ``enter`` hears each phase as it begins, ``say`` each step in words."""
    options = options or UpgradeOptions()
    home.require()
    handle: StandbyHandle | None = None
    stopped: StopResult | None = None
    try:
        if options.standby:
            enter(UpgradePhase.STANDBY)
            handle = start_standby(home, new, launcher, options, by=by, say=say)
        if handle is not None:
            wait_ready(home, handle, options.standby_ready_timeout_seconds, options.poll_seconds, secrets, by=by)
        enter(UpgradePhase.STOP)
        say("stopping the running version with a savepoint")
        stopped = stop_job(home, options.stop_timeout_seconds, savepoint=True,
                           poll=stop_poll_seconds(options.poll_seconds, standby=handle is not None),
                           by=by, pin_reason=pin_reason(new.app_version))
    except StreamError:
        end_unused_standby(home, handle)
        raise
    healthy = _start_and_gate(home, new, launcher, kafka_config, options, stopped, handle, secrets, by, say, enter)
    rolled_back = None
    if healthy is None and options.rollback:
        rolled_back = _roll_back(home, stopped, launcher, options, secrets, by, say, enter)
    enter(UpgradePhase.OUTCOME)
    outcome = decide_outcome(home, new.app_version, stopped, healthy, rolled_back, options.rollback, handle)
    keep_hot_standby(home, launcher, by=by)  # the job's wish outlives the version (a failed one raised above)
    return outcome


def start_standby(home: JobHome, new: Submission, launcher: Launcher, options: UpgradeOptions, *,
                  by: str | None = None, say: Callable[[str], None] = log.info) -> StandbyHandle | None:
    """Step 0's start, the same from both front-ends: the new version's standby, or None when the job does not
    run (nothing to take over from: the new version starts cold; ``say`` hears why). A live standby of the same
    version (``standby launch`` warmed it ahead) is used if its rehearsal fits the upgrade; one of another
    version makes the launch refuse, since it is not this upgrade's to end."""
    running, status = job_is_running(home)
    if not running:
        say(f"job {home.url} does not run (state {written_state(status)}): there is nothing to take over from, "
            f"version {new.app_version} starts cold")
        return None
    if end_hot_standby(home, f"replaced by the standby of the upgrade to version {new.app_version}", by=by):
        say("ended the job's hot standby: the upgrade's standby replaces it (a hot standby of the new version "
            "follows once the upgrade is over)")
    live = live_standby(home)
    if live is not None and live.app_version == new.app_version:
        _refuse_unfit_standby(home, live, options)
        say(f"using the live standby of version {new.app_version} (pid {live.pid})")
        return live
    say(f"starting version {new.app_version} as a warm standby")
    return launch_standby(home, new, launcher, by=by, rehearse=options.rehearsal_request())


def _refuse_unfit_standby(home: JobHome, live: StandbyHandle, options: UpgradeOptions) -> None:
    """A standby launched ahead (``standby launch --drop-state``) that rehearsed without the state cannot serve an
    upgrade that keeps it: the state was never checked against the new query."""
    asked = (home.standby_record() or {}).get("rehearse") or {}
    if asked.get("drop_state") and not options.drop_state:
        raise JobStateError(
            f"the live standby of version {live.app_version} (pid {live.pid}) rehearsed without the job's state (it "
            "was launched to drop it), so it cannot take over an upgrade that keeps the state; nothing was changed. "
            "Upgrade with drop_state, or end it (standby end) and upgrade again", setting="drop_state")


def _start_and_gate(home: JobHome, new: Submission, launcher: Launcher, kafka_config: Mapping[str, Any],
                    options: UpgradeOptions, stopped: StopResult, handle: StandbyHandle | None,
                    secrets: list[str] | None, by: str | None, say: Callable[[str], None],
                    enter: Callable[[UpgradePhase], None]) -> dict[str, Any] | None:
    """Steps 2–4: the new version's start and health gate; None when either failed (logged with why)."""
    try:
        if options.drop_state:
            enter(UpgradePhase.RESTORE)
            say(f"restoring savepoint {savepoint_of(stopped)} without state")
            restore(home, savepoint_of(stopped), drop_state=True, allow_sink_batch_log=options.allow_sink_batch_log,
                    by=by)
        enter(UpgradePhase.START)
        if handle is not None:  # after a restore too: the standby starts from the generation current at its go
            say(f"giving the standby of version {new.app_version} the go")
            started = hand_over(home, handle, stopped, takeover_stopped=options.takeover_stopped, by=by)
        else:
            say(f"starting version {new.app_version}")
            started = submit(home, new, launcher, by=by)
        event = wait(lambda: look_started(home, started, 0), options.start_timeout_seconds, options.poll_seconds)
        conclude_start(home, started, event, secrets)
        enter(UpgradePhase.HEALTH)
        say(f"health gate: {options.health_batches} batches, lag not growing for {options.health_window_seconds:.0f}s")
        gate = HealthLook(home, kafka_config, options.health_spec(datetime.fromisoformat(started.submitted_at)),
                          options.health_timeout_seconds)
        verdict = wait(gate, options.health_timeout_seconds + options.poll_seconds, options.poll_seconds)
    except StreamError as exc:
        say(f"version {new.app_version} failed to start: {exc}")
        return None
    if verdict.get("status") != WaitStatus.SUCCESS:
        say(f"version {new.app_version} failed its health gate: {verdict.get('message')}")
        return None
    return verdict


def _roll_back(home: JobHome, stopped: StopResult, launcher: Launcher, options: UpgradeOptions,
               secrets: list[str] | None, by: str | None, say: Callable[[str], None],
               enter: Callable[[UpgradePhase], None]) -> dict[str, Any] | None:
    """Step 5: stop the new version, restore the savepoint with its state, start the previous version as it
    was submitted; None when any part failed (the outcome then says how to finish by hand)."""
    previous, savepoint = stopped.app_version, savepoint_of(stopped)
    try:
        enter(UpgradePhase.ROLLBACK_STOP)
        say("rolling back: stopping the new version")
        stop_job(home, options.stop_timeout_seconds, savepoint=False, on_timeout="kill",
                 poll=min(options.poll_seconds, 1.0), by=by)
        enter(UpgradePhase.ROLLBACK_RESTORE)
        say(f"rolling back: restoring savepoint {savepoint}")
        restored = restore(home, str(savepoint), allow_sink_batch_log=options.allow_sink_batch_log, by=by)
        enter(UpgradePhase.ROLLBACK_START)
        say(f"rolling back: starting version {previous} as it was last submitted")
        started: SubmitResult = replay(home, str(previous), launcher, by=by)
        event = wait(lambda: look_started(home, started, 1), options.start_timeout_seconds, options.poll_seconds)
        running = conclude_start(home, started, event, secrets)
    except StreamError as exc:
        say(f"the rollback failed: {exc}")
        return None
    return {**running, "generation": restored.generation}
