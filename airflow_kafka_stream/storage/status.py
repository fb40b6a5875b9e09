"""The running job's status file, ``<home>/status.json``.

The job's driver rewrites it every few seconds (a heartbeat) and after every
batch; the control plane reads it to learn whether the job runs before it
touches the checkpoint. It is always written whole (temporary name and rename
locally, one PUT on object stores), so a reader never sees half a file.

States: STARTING -> RUNNING <-> DRAINING -> STOPPED, or FAILED from any of them
(DRAINING returns to RUNNING when the stop request is withdrawn).
A job counts as running while its state is STARTING, RUNNING or DRAINING *and*
its heartbeat is fresh; a stale heartbeat means the driver died without saying so.
Where the driver ran on the reader's host, a driver whose Python process and
JVM are both gone is not running either, however fresh its last heartbeat
(:func:`is_running`): an operation after a ``kill -9`` need not wait it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow_kafka_stream.storage.files import dump_json, url_to_fs, write_atomic

STARTING = "STARTING"
RUNNING = "RUNNING"
DRAINING = "DRAINING"
STOPPED = "STOPPED"
FAILED = "FAILED"

ACTIVE_STATES = frozenset({STARTING, RUNNING, DRAINING})
FINAL_STATES = frozenset({STOPPED, FAILED})
ALL_STATES = ACTIVE_STATES | FINAL_STATES

STATUS_FILE = "status.json"

#: A heartbeat older than this many intervals means the driver is gone.
DEFAULT_STALE_AFTER_INTERVALS = 4

#: A driver that could not write its heartbeat for this many intervals fences itself (stops its query).
#: Every reader allows at least DEFAULT_STALE_AFTER_INTERVALS, so half the window is left for the stop.
FENCE_AFTER_INTERVALS = 2


def status_path(home_url: str) -> str:
    return f"{str(home_url).rstrip('/')}/{STATUS_FILE}"


def read_status(home_url: str, storage_options: dict | None = None) -> dict[str, Any] | None:
    """The job's last status, or None when it has none yet (or it is unreadable)."""
    from airflow_kafka_stream.storage.jobhome import JobHome

    return JobHome(home_url, storage_options).status()


def write_status(home_url: str, status: Mapping[str, Any], storage_options: dict | None = None) -> None:
    """Replace the status file as a whole."""
    fs, path = url_to_fs(status_path(home_url), storage_options)
    write_atomic(fs, path, dump_json(dict(status)))


def heartbeat_age(status: Mapping[str, Any], now: float | datetime) -> float | None:
    """Seconds since the status's heartbeat, or None when it has no usable heartbeat."""
    beat = status.get("heartbeat_epoch")
    if isinstance(beat, bool) or not isinstance(beat, int | float):
        return None
    now_epoch = now.timestamp() if isinstance(now, datetime) else float(now)
    return now_epoch - float(beat)


def max_heartbeat_age(status: Mapping[str, Any] | None, floor: float) -> float:
    """How old a heartbeat may be before its job counts as gone: ``floor``, or more for a slow-beating job,
    plus the clock skew the job declared (the reader may run on another host than the driver)."""
    from airflow_kafka_stream.core.job_watch import heartbeat_limit

    return heartbeat_limit(status or {}, floor)


def is_alive(status: Mapping[str, Any] | None, now: float | datetime, max_age_seconds: float) -> bool:
    """Whether the job that wrote ``status`` is still running at ``now``.

    Running means: an active state (STARTING, RUNNING, DRAINING) and a heartbeat
    no older than ``max_age_seconds``. No status, a final state (STOPPED,
    FAILED), an unknown state or a missing/stale heartbeat all mean not running.
    A heartbeat from the future (clock skew between hosts) counts as fresh.
    """
    if not status or status.get("state") not in ACTIVE_STATES:
        return False
    age = heartbeat_age(status, now)
    return age is not None and age <= max_age_seconds


def is_running(status: Mapping[str, Any] | None, now: float | datetime, max_age_seconds: float) -> bool:
    """:func:`is_alive`, unless the driver ran on this host and its processes are gone (``driver_gone``)."""
    from airflow_kafka_stream.storage.processes import driver_gone

    return is_alive(status, now, max_age_seconds) and not driver_gone(status)
