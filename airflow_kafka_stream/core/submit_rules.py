"""Decide whether a submit starts a driver, as a pure function of what the job home says.

A retried or re-triggered submit must never start a second driver. What the
job home holds at the moment of a submit decides, in order:
1. A driver lives (by the one liveness rule, ``core.liveness``: an active state,
   a fresh heartbeat, its processes not gone from this host): the same application
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

from airflow_kafka_stream.core.liveness import liveness
from airflow_kafka_stream.core.status_document import StatusDocument


class SubmitAction(enum.StrEnum):
    LAUNCH = "launch"
    WAIT = "wait"
    REFUSE = "refuse"


@dataclass(frozen=True)
class SubmitDecision:
    action: SubmitAction
    reason: str


def decide_submit(*, status: StatusDocument | None, running_version: str | None,
                  launch_record: Mapping[str, Any] | None, launcher_alive: bool | None, version: str,
                  now: datetime, max_heartbeat_age: float = 30.0, start_grace_seconds: float = 180.0,
                  processes_gone: bool | None = None) -> SubmitDecision:
    """``launcher_alive``: whether the launch record's process still exists (None: cannot tell, e.g. another host);
    ``processes_gone``: whether the status's driver is gone from this host, as in ``core.liveness``."""
    # 1. A live driver.
    if liveness(status, now=now, processes_gone=processes_gone, max_heartbeat_age=max_heartbeat_age).alive:
        assert status is not None
        if running_version == version:
            return SubmitDecision(SubmitAction.WAIT, f"version {version} already runs (state "
                                                     f"{status.state_text}, pid {status.pid})")
        return SubmitDecision(SubmitAction.REFUSE, f"version {running_version} runs (state {status.state_text},"
                                                   f" pid {status.pid}); stop it before submitting "
                                                   f"version {version}, or run an upgrade")
    # 2. A driver launched moments ago that has not reported yet.
    if launch_pending(status, launch_record, launcher_alive, now, start_grace_seconds):
        assert launch_record is not None
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


def launch_pending(status: StatusDocument | None, launch_record: Mapping[str, Any] | None,
                   launcher_alive: bool | None, now: datetime, start_grace_seconds: float = 180.0) -> bool:
    """Whether a driver was launched less than ``start_grace_seconds`` ago, has not reported since (no status
    started after the launch) and its process is not known dead: it is starting (a JVM takes seconds)."""
    if not launch_record or launcher_alive is False:
        return False
    launched = _time(launch_record.get("launched_at"))
    started = None if status is None else status.started_at
    reported = started is not None and launched is not None and started >= launched
    return launched is not None and not reported and (now - launched).total_seconds() <= start_grace_seconds


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
