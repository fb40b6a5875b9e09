"""A job's operation history and its lock, as operations (recording an operation is in storage.operation)."""

from __future__ import annotations

from airflow_kafka_stream.ops.results import History, HistoryEntry, UnlockResult
from airflow_kafka_stream.storage.jobhome import JobHome


def history(home: JobHome) -> History:
    """The job's operation history, oldest first (refused for a directory that is not a job home)."""
    home.require()
    return History(home.url, tuple(HistoryEntry.of(record) for record in home.history()))


def unlock(home: JobHome) -> UnlockResult:
    """Release the job lock an operation left behind when its process died; returns what it held."""
    home.require()
    return UnlockResult(home.url, home.force_unlock())
