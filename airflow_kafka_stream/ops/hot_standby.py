"""Keep a hot standby beside a running job: a second driver of the running version that takes the job over
when its driver dies (``core.failover``; the driver side is ``runtime/standby.py``).

The wish is the job's, recorded in job.json (``hot_standby``: the restart policy the standby judges with), so
that it outlives the operation that set it: a submit sets or clears it, an upgrade and a restore keep it, and
every supervisor or watchdog pass records its own policy there (:func:`align_policy`): one budget, one set of
limits. The keeper (:func:`keep_hot_standby`) launches one when the job runs, wants one and has no live
standby; it is called after a submit, an upgrade or a restore started the job, and by every watchdog and supervisor pass, so a
standby that took over or died is replaced there. A standby that keeps dying is relaunched with a doubling
backoff and not beyond a limit (``core.failover.relaunch_due``).

There is one standby record per job: an upgrade ends the hot standby before it launches its own (the next
version's), and the keeper launches a hot standby of the new version once the upgrade is over.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.failover import FAILOVER_OPERATION, Relaunch, relaunch_due
from airflow_kafka_stream.core.standby import HOT_STANDBY_SPEC_KEY, is_hot  # noqa: F401 - is_hot: importable here
from airflow_kafka_stream.core.watchdog import DELIBERATE, Policy
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.launcher import Launcher
from airflow_kafka_stream.ops.results import StandbyHandle
from airflow_kafka_stream.ops.standby import end_standby, launch_standby, live_standby
from airflow_kafka_stream.ops.submit import recorded_submission
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)

#: job.json's key for the wish (``core.standby``), and the history record of each launch.
SPEC_KEY = HOT_STANDBY_SPEC_KEY
LAUNCH_OPERATION = "hot-standby-launch"
#: Operations after which the launches are counted afresh (a takeover served; a deliberate change).
_FRESH_START = (FAILOVER_OPERATION, "upgrade", *DELIBERATE)


def set_wish(home: JobHome, wanted: bool | None, policy: Policy | None = None) -> None:
    """Record whether the job wants a hot standby (None: leave it as it is), with the restart policy it judges
    the driver by (the supervisor's and the watchdog's; their defaults when not given)."""
    if wanted is None:
        return
    spec = home.spec()
    value = {"policy": asdict(policy or Policy())} if wanted else None
    if spec.get(SPEC_KEY) == value:
        return  # nothing to change: job.json is not written (its driver may be writing it)
    spec[SPEC_KEY] = value
    home.write_spec(spec)


def align_policy(home: JobHome, policy: Policy) -> None:
    """Record ``policy`` with the job's wish (a supervisor's or a watchdog's pass): the hot standby judges a dead
    driver with the limits of the budget they share, whatever the submit that set the wish gave."""
    found = wish(home)
    if found is not None and found.get("policy") != asdict(policy):
        set_wish(home, True, policy)


def wish(home: JobHome) -> dict[str, Any] | None:
    """The job's wish (``{"policy": {...}}``), None when it wants no hot standby."""
    found = home.spec().get(SPEC_KEY)
    return dict(found) if isinstance(found, Mapping) else None


def launches_since_fresh_start(home: JobHome) -> list[datetime]:
    """When hot standbys were launched since the last takeover or deliberate operation (the relaunch budget)."""
    found: list[datetime] = []
    for record in home.history():
        if record.get("result") != "ok":
            continue
        if record.get("operation") in _FRESH_START:
            found = []
        elif record.get("operation") == LAUNCH_OPERATION:
            try:
                found.append(datetime.fromisoformat(record["started_at"]))
            except (KeyError, TypeError, ValueError):
                continue
    return found


def due(home: JobHome, now: datetime | None = None) -> Relaunch | None:
    """Whether the keeper should launch a hot standby now: None when it has nothing to do (no wish, the job does
    not run, a standby is live), else the relaunch rule's answer."""
    now = now or datetime.now(UTC)
    if wish(home) is None or live_standby(home, now) is not None or not job_is_running(home, now)[0]:
        return None
    return relaunch_due(launches_since_fresh_start(home), now)


def keep_hot_standby(home: JobHome, launcher: Launcher, *, by: str | None = None,
                     now: datetime | None = None) -> StandbyHandle | None:
    """Launch a hot standby of the running version when :func:`due` says so; the handle, or None when none was
    launched (the reason is logged). The launch does not wait for READY: the standby says so in its record."""
    now = now or datetime.now(UTC)
    answer = due(home, now)
    if answer is None or not answer.due:
        if answer is not None:
            log.warning("job %s: no hot standby launched: %s", home.url, answer.reason)
        return None
    version = str(home.spec().get("version") or "")
    handle = launch_standby(home, recorded_submission(home, version), launcher, by=by, now=now,
                            hot=wish(home), operation=LAUNCH_OPERATION)
    log.info("job %s: hot standby of version %s launched (pid %s): %s", home.url, version, handle.pid, answer.reason)
    return handle


def end_hot_standby(home: JobHome, reason: str, by: str | None = None) -> bool:
    """End the job's live hot standby (an upgrade replaces it; a submit without the wish); whether one was."""
    handle = live_standby(home)
    if handle is None or not is_hot(home.standby_record()):
        return False
    return end_standby(home, handle, reason, by=by)
