"""Decide whether a submit starts a driver, as a pure function of what the job home says.

A retried or re-triggered submit must never start a second driver. What the
job home holds at the moment of a submit decides, in order:
1. A driver heart-beats (active state, fresh heartbeat): the same application
   version means the submit already happened, so wait for it; another version
   is refused (stop it, or upgrade).
2. A driver was launched a short while ago (its launch record is younger than
   the start grace and its process is not known dead) but has not written a
   heartbeat yet (a JVM takes seconds to start): the same version waits for
   it, another is refused.
3. Otherwise a driver is launched.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.job_watch import ACTIVE_STATES, is_stale


class SubmitAction(enum.StrEnum):
    LAUNCH = "launch"
    WAIT = "wait"
    REFUSE = "refuse"


@dataclass(frozen=True)
class SubmitDecision:
    action: SubmitAction
    reason: str


def decide_submit(*, status: Mapping[str, Any] | None, running_version: str | None,
                  launch_record: Mapping[str, Any] | None, launcher_alive: bool | None, version: str,
                  now: datetime, max_heartbeat_age: float = 30.0, start_grace_seconds: float = 180.0
                  ) -> SubmitDecision:
    """``launcher_alive``: whether the launch record's process still exists (None: cannot tell, e.g. another host)."""
    # 1. A live driver.
    if status and status.get("state") in ACTIVE_STATES:
        if not is_stale(status, max_heartbeat_age, now):
            if running_version == version:
                return SubmitDecision(SubmitAction.WAIT, f"version {version} already runs (state "
                                                         f"{status.get('state')}, pid {status.get('pid')})")
            return SubmitDecision(SubmitAction.REFUSE, f"version {running_version} runs (state {status.get('state')},"
                                                       f" pid {status.get('pid')}); stop it before submitting "
                                                       f"version {version}, or run an upgrade")
    # 2. A driver launched moments ago that has not reported yet.
    if launch_record and launcher_alive is not False:
        launched = _time(launch_record.get("launched_at"))
        started = _time((status or {}).get("started_at"))
        reported = started is not None and launched is not None and started >= launched
        if launched is not None and not reported and (now - launched).total_seconds() <= start_grace_seconds:
            launched_version = str(launch_record.get("app_version"))
            if launched_version == version:
                return SubmitDecision(SubmitAction.WAIT, f"a driver of version {version} was launched at "
                                                         f"{launch_record.get('launched_at')} (pid "
                                                         f"{launch_record.get('pid')}) and is starting")
            return SubmitDecision(SubmitAction.REFUSE, f"a driver of version {launched_version} was launched at "
                                                       f"{launch_record.get('launched_at')} and is starting; wait for "
                                                       f"it and stop it before submitting version {version}")
    # 3. Nothing runs.
    return SubmitDecision(SubmitAction.LAUNCH, "no driver runs for this job")


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
