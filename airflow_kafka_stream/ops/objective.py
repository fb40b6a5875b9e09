"""A job's lag objective: recorded in its home, looked at by the objective sensor, its trigger and the
watchdog DAG, every breach a history record.

``control/objective.json`` holds the objective the last check used (``objective``: ``max_lag_seconds``,
``for_seconds``), who recorded it and when, and the looks' memory (``core.objective``: since when the lag is
above, and each partition's lag then). A look reads the status's ``time_lag`` and judges it
(``core.objective.judge_objective``); a breach appends an ``objective-breach`` record to the history (the
job page marks them), so every task a breach fails has its record.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.objective import LagObjective, ObjectiveCheck, Verdict, judge_objective
from airflow_kafka_stream.storage.jobhome import JobHome, utc_now, who_am_i
from airflow_kafka_stream.storage.operation import recorded_operation

log = logging.getLogger(__name__)

#: The history operation of a breach.
BREACH_OPERATION = "objective-breach"
#: An event status of a look at a job that does not run: nothing to hold to the objective.
SKIPPED = "skipped"

_STATUS_OF = {Verdict.MET: WaitStatus.SUCCESS, Verdict.BREACH: WaitStatus.FAILED, Verdict.NOT_RUNNING: SKIPPED,
              Verdict.ABOVE: WaitStatus.WAITING, Verdict.UNMEASURED: WaitStatus.WAITING}


def recorded_objective(home: JobHome) -> LagObjective | None:
    """The objective the job's last check used, None when none was recorded."""
    return LagObjective.parse((home.objective() or {}).get("objective"))


def record_objective(home: JobHome, objective: LagObjective, by: str | None = None) -> None:
    """Record ``objective`` as the job's (the job page shows it); the looks' memory is kept when it is the same
    objective, started again when it changed."""
    found = home.objective() or {}
    same = LagObjective.parse(found.get("objective")) == objective
    home.write_objective({"objective": objective.to_dict(), "recorded_at": utc_now().isoformat(),
                          "by": by or who_am_i(), "memory": (found.get("memory") or {}) if same else {}})


def look_objective(home: JobHome, objective: LagObjective, now: datetime | None = None,
                   by: str | None = None) -> dict[str, Any]:
    """One look: judge the job's time lag against ``objective``, keep the memory, record a breach.

    Returns an event (``ops.watch``): ``success`` within the objective, ``failed`` on a breach, ``waiting``
    while the lag is above for less than ``for_seconds`` or not measured yet, ``skipped`` when the job does
    not run. ``check`` holds the judgement (partitions above the objective with their lag and trend).
    """
    now = now or datetime.now(UTC)
    document = home.status_document()
    found = home.objective() or {}
    same = LagObjective.parse(found.get("objective")) == objective
    check = judge_objective(objective, document.time_lag if document else None,
                            bool(document and document.is_live), now, found.get("memory") if same else None)
    home.write_objective({**found, "objective": objective.to_dict(), "memory": check.memory,
                          "last_check": {"at": now.isoformat(), "verdict": check.verdict.value,
                                         "max_seconds": check.max_seconds}})
    if check.verdict is Verdict.BREACH:
        _record_breach(home, check, by)
    return {"status": _STATUS_OF[check.verdict], "message": check.message, "check": check.to_dict()}


def _record_breach(home: JobHome, check: ObjectiveCheck, by: str | None) -> None:
    with recorded_operation(home, BREACH_OPERATION, check.objective.to_dict(), by=by, lock=False) as record:
        record["after"] = check.to_dict()
        record["result"] = "breached"
        record["error"] = check.message
    log.warning("job %s: %s", home.url, check.message)


def breaches(home: JobHome, records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The history's breaches, oldest first: when, the worst lag, and the message."""
    found = []
    for record in home.history() if records is None else records:
        if record.get("operation") != BREACH_OPERATION:
            continue
        after = record.get("after") or {}
        found.append({"at": record.get("started_at"), "max_seconds": after.get("max_seconds"),
                      "above_since": after.get("above_since"), "message": record.get("error")})
    return found
