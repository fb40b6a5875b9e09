"""The running job's status file, ``<home>/status.json``.

The job's driver rewrites it every few seconds (a heartbeat) and after every
batch; the control plane reads it to learn whether the job runs before it
touches the checkpoint. It is always written whole (temporary name and rename
locally, one PUT on object stores), so a reader never sees half a file.

States: STARTING -> RUNNING <-> DRAINING -> STOPPED, or FAILED from any of them
(DRAINING returns to RUNNING when the stop request is withdrawn).
Whether the job runs is decided by one rule, ``core.liveness``, for every
reader (:func:`observe_liveness` adds what only this host can see): an active
state and a fresh heartbeat, unless the driver ran on this host and its Python
process and JVM are both gone, which makes it dead at once (an operation or the
watchdog after a ``kill -9`` need not wait the heartbeat out).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_kafka_stream.core.liveness import DEFAULT_MAX_HEARTBEAT_AGE, heartbeat_limit, liveness
from airflow_kafka_stream.core.liveness import heartbeat_age as age
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.storage.files import dump_json, url_to_fs, write_atomic
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.layout import STATUS
from airflow_kafka_stream.storage.processes import driver_gone

if TYPE_CHECKING:
    from airflow_kafka_stream.core.liveness import Liveness
STATUS_FILE = "/".join(STATUS)

#: A driver that could not write its heartbeat for this many intervals fences itself (stops its query).
#: Every reader allows at least ``core.liveness.STALE_AFTER_INTERVALS``, so half the window is left for the stop.
FENCE_AFTER_INTERVALS = 2


def status_path(home_url: str) -> str:
    return f"{str(home_url).rstrip('/')}/{STATUS_FILE}"


def read_status(home_url: str, storage_options: dict | None = None) -> dict[str, Any] | None:
    """The job's last status, or None when it has none yet (or it is unreadable)."""
    return JobHome(home_url, storage_options).status()


def read_status_document(home_url: str, storage_options: dict | None = None) -> StatusDocument | None:
    """The job's last status, typed (``core.status_document``); None when it has none yet (or it is unreadable)."""
    return JobHome(home_url, storage_options).status_document()


def write_status(home_url: str, status: Mapping[str, Any], storage_options: dict | None = None, *,
                 durable: bool = True) -> None:
    """Replace the status file as a whole. A beat of a running driver is written with ``durable=False``: an
    fsync waits behind every other write of the disk (seconds on a busy one, measured while brokers recovered
    their logs beside a driver), and a beat lost to a crash of the host is replaced by the next one; a state
    change is written durably."""
    fs, path = url_to_fs(status_path(home_url), storage_options)
    write_atomic(fs, path, dump_json(dict(status)), durable=durable)


def heartbeat_age(status: Mapping[str, Any] | StatusDocument | None, now: float | datetime) -> float | None:
    """Seconds since the status's heartbeat, or None when it has no usable heartbeat."""
    return age(StatusDocument.of(status), now)


def max_heartbeat_age(status: Mapping[str, Any] | StatusDocument | None, floor: float) -> float:
    """How old a heartbeat may be before its job counts as gone: ``floor``, or more for a slow-beating job,
    plus the clock skew the job declared (the reader may run on another host than the driver)."""
    return heartbeat_limit(StatusDocument.of(status), floor)


def observe_liveness(status: Mapping[str, Any] | StatusDocument | None, now: float | datetime,
                     max_heartbeat_age: float = DEFAULT_MAX_HEARTBEAT_AGE) -> Liveness:
    """The one liveness rule (``core.liveness``) fed with what only this host can see: whether the driver's
    Python process and JVM are gone (``storage.processes.driver_gone``; unknown for another host's driver).
    ``status`` as read or already parsed (``core.status_document``)."""
    document = StatusDocument.of(status)
    gone = driver_gone(document) if document is not None and document.is_live else None
    return liveness(document, now=now, processes_gone=gone, max_heartbeat_age=max_heartbeat_age)


def is_alive(status: Mapping[str, Any] | StatusDocument | None, now: float | datetime,
             max_age_seconds: float) -> bool:
    """The heartbeat half of the rule with a limit already worked out (``max_heartbeat_age``): an active state
    and a heartbeat no older than ``max_age_seconds`` (one from the future counts as fresh). Operations use
    :func:`observe_liveness`, which also knows a driver gone from this host."""
    document = StatusDocument.of(status)
    if document is None or not document.is_live:
        return False
    age = heartbeat_age(document, now)
    return age is not None and age <= max_age_seconds


def is_running(status: Mapping[str, Any] | StatusDocument | None, now: float | datetime,
               max_heartbeat_age: float = DEFAULT_MAX_HEARTBEAT_AGE) -> bool:
    """Whether the job runs, by the one rule (:func:`observe_liveness`)."""
    return observe_liveness(status, now, max_heartbeat_age).alive
