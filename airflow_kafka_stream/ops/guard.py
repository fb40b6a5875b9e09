"""Refuse operations that would corrupt a running job.

A reset or restore while the job runs corrupts it. The consumer group alone
proves nothing (Spark assigns partitions instead of joining the group, so the
group looks Empty while the job reads), so liveness comes from the job's own
status by the one rule (``core.liveness``). The group is a second signal: since the
job never joins it, any member the coordinator lists is another consumer using the
job's group id, and a reason to refuse too (:func:`ensure_group_unused`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.liveness import DEFAULT_MAX_HEARTBEAT_AGE as _DEFAULT_AGE
from airflow_kafka_stream.core.liveness import Liveness, ShownState, shown_state
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.kafka.groups import describe_group
from airflow_kafka_stream.storage.jobhome import JobHome, utc_now
from airflow_kafka_stream.storage.status import observe_liveness

log = logging.getLogger(__name__)

#: A heartbeat older than this means the job is not running (it refreshes every few seconds).
DEFAULT_MAX_HEARTBEAT_AGE = _DEFAULT_AGE


def job_liveness(home: JobHome, now: datetime | None = None,
                 max_age: float = DEFAULT_MAX_HEARTBEAT_AGE) -> tuple[Liveness, dict | None]:
    """The job's liveness by the one rule (``core.liveness`` through ``storage.status.observe_liveness``: a
    driver gone from this host is dead at once, one elsewhere by its heartbeat), and the status read."""
    status = home.status()
    return observe_liveness(status, now or utc_now(), max_age), status


#: The history record of a watchdog's or supervisor's give-up (``ops.watchdog``).
GIVE_UP_OPERATION = "watchdog-give-up"


def job_shown_state(home: JobHome, now: datetime | None = None, max_age: float = DEFAULT_MAX_HEARTBEAT_AGE
                    ) -> tuple[ShownState, Liveness, dict | None]:
    """The one state every front end shows (``core.liveness.shown_state``), the liveness it came from, and the
    status read."""
    found, status = job_liveness(home, now, max_age)
    document = StatusDocument.parse(status)
    gave_up = None if found.alive else gave_up_on(home, document)
    request = home.stop_request() if gave_up else None
    if request:  # a stop after the give-up: a person decided it stays down
        gave_up += (f"; acknowledged by {request.get('by')} at {request.get('requested_at')}: it stays stopped until "
                    "it is started again")
    return shown_state(document, found, gave_up), found, status


def gave_up_on(home: JobHome, status: Mapping[str, Any] | StatusDocument | None) -> str | None:
    """Why recovery gave up on the run ``status`` describes: the newest give-up recorded after that run started;
    None when there is none (a later submit starts a new run, which no give-up is about yet)."""
    document = StatusDocument.of(status)
    started = document.started_at if document is not None else None
    if started is None:
        return None
    reason = None
    for record in home.history():
        if record.get("operation") != GIVE_UP_OPERATION:
            continue
        try:
            when = datetime.fromisoformat(str(record.get("started_at")))
        except ValueError:
            continue
        try:
            after_start = when >= started
        except TypeError:  # a time without a zone, written by hand: it cannot be placed
            continue
        if after_start:
            reason = str(record.get("error") or (record.get("args") or {}).get("reason") or "no reason recorded")
    return reason


def job_is_running(home: JobHome, now: datetime | None = None,
                   max_age: float = DEFAULT_MAX_HEARTBEAT_AGE) -> tuple[bool, dict | None]:
    """Whether the job runs (:func:`job_liveness`), and the status read."""
    found, status = job_liveness(home, now, max_age)
    return found.alive, status


def ensure_not_running(home: JobHome | None, kafka_config: Mapping[str, object] | None = None,
                       group: str | None = None,
                       operation: str = "this operation", now: datetime | None = None,
                       max_age: float = DEFAULT_MAX_HEARTBEAT_AGE) -> None:
    """Raise JobStateError when the job runs (fresh heartbeat) or, given the Kafka config and group, when the group
    has members (:func:`ensure_group_unused`)."""
    if home is not None:
        running, status = job_is_running(home, now, max_age)
        if running:
            document = StatusDocument.parse(status)
            assert document is not None
            raise JobStateError(
                f"job {home.url} is running (state {document.state_text}, application "
                f"{document.application_id or '?'}, heartbeat {document.heartbeat_text or '?'}); "
                f"{operation} would corrupt it. Stop it first with the stop operation (the CLI's stop command or the "
                "stop operator, on this job home), then try again"
            )
    if kafka_config and group:
        ensure_group_unused(kafka_config, group, operation)


def ensure_group_unused(kafka_config: Mapping[str, object], group: str, operation: str = "this operation") -> None:
    """Raise JobStateError when someone consumes with the job's group: a member (any: the job never joins its
    group, core.consumer_group says why), named by client id and host, or a state in which members are joining."""
    found = describe_group(kafka_config, group)
    if found.foreign_members:
        raise JobStateError(
            f"consumer group {group!r} ({found.protocol} protocol, {found.state}) has {len(found.foreign_members)} "
            f"active member(s) that are not the job: {found.members_text()}; {operation} is refused while another "
            "consumer uses the job's group id (the job itself never joins its group). Stop those consumers or give "
            "them their own group.id, then try again"
        )
    if found.in_use:
        raise JobStateError(
            f"consumer group {group!r} is {found.state}: some consumer is active in it; {operation} is refused "
            "while it consumes. Stop that consumer (or the job) and try again"
        )
