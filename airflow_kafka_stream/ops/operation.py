"""A job's operation history and its lock, as operations (recording an operation is in storage.operation)."""

from __future__ import annotations

from typing import Any

from airflow_kafka_stream.storage.jobhome import JobHome


def history(home: JobHome) -> list[dict[str, Any]]:
    """The job's operation history, oldest first (refused for a directory that is not a job home)."""
    home.require()
    return home.history()


def unlock(home: JobHome) -> dict[str, Any] | None:
    """Release the job lock an operation left behind when its process died; returns what it held."""
    home.require()
    return home.force_unlock()
