"""Run a control-plane operation under the job lock and record it in the job's history.

It lives in storage, beside the job home's lock and history it uses, so that every layer that
changes a job home records the same way: the operations in ops/ and the driver runtime's start
(which must not import ops, a layer above it).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow_kafka_stream.core.redaction import redact
from airflow_kafka_stream.errors import InvalidInputError, OperationIncompleteError, StreamError
from airflow_kafka_stream.storage.jobhome import JobHome, utc_now, who_am_i

log = logging.getLogger(__name__)


@contextmanager
def recorded_operation(home: JobHome, name: str, args: dict[str, Any], by: str | None = None,
                       lock: bool = True, existing_home: bool = True,
                       lock_wait_seconds: float = 0.0) -> Iterator[dict[str, Any]]:
    """Hold the job lock while the body runs and append what happened to the job's history.

    With ``existing_home`` (all but a job's first start) a directory that is not a
    job home is refused first, before a lock or a history file could create it: a
    mistyped job home is refused the same way from the CLI and from Airflow.

    The body fills ``record["before"]``, ``record["after"]`` and ``record["result"]``
    (default "ok"); an exception marks the record "refused" (bad input or wrong job
    state) or "failed" and is re-raised. A lock held by another operation refuses it before the body runs,
    and that is recorded too: whoever asked (a run the job page triggered) finds the refusal in the history.
    """
    record: dict[str, Any] = {
        "operation": name,
        "by": by or who_am_i(),
        "started_at": utc_now().isoformat(),
        "args": redact(args),
        "before": None,
        "after": None,
        "result": "ok",
    }
    airflow_run = airflow_task()
    if airflow_run:
        record["airflow"] = airflow_run  # the job page finds what a run it triggered did by this
    if existing_home:
        home.require()
    started = time.monotonic()
    holder = record["by"]
    lock_cm = home.lock(name, holder, lock_wait_seconds) if lock else _no_lock()
    with _refusal_recorded(home, record, started), lock_cm:
        try:
            yield record
        except InvalidInputError as exc:
            record.update(result="refused", error=str(exc))
            raise
        except OperationIncompleteError as exc:
            record.update(result="failed", error=str(exc))
            raise
        except StreamError as exc:
            record.update(result="refused" if record["after"] is None else "failed", error=str(exc))
            raise
        except BaseException as exc:
            record.update(result="failed", error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            _append(home, record, started, compact=lock)


@contextmanager
def _refusal_recorded(home: JobHome, record: dict[str, Any], started: float) -> Iterator[None]:
    """Record the operation as refused when the job lock could not be taken (the body never ran)."""
    try:
        yield
    except StreamError as exc:
        if record.get("finished_at") is None:  # else the body ran and its outcome is recorded
            record.update(result="refused", error=str(exc))
            _append(home, record, started, compact=False)
        raise


def _append(home: JobHome, record: dict[str, Any], started: float, compact: bool) -> None:
    record["finished_at"] = utc_now().isoformat()
    record["seconds"] = round(time.monotonic() - started, 3)
    try:
        home.append_history(record)
        if compact:
            home.compact_history()
    except Exception:  # noqa: BLE001 - never hide the operation's own outcome
        log.exception("could not append to the history of %s", home.url)


def airflow_task() -> dict[str, str] | None:
    """The Airflow task this process runs (``dag_id``, ``run_id``, ``task_id``), None outside one: Airflow exports
    them to the environment of the task it runs (``AIRFLOW_CTX_*``)."""
    run_id = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID")
    if not run_id:
        return None
    return {"dag_id": os.environ.get("AIRFLOW_CTX_DAG_ID", ""), "run_id": run_id,
            "task_id": os.environ.get("AIRFLOW_CTX_TASK_ID", "")}


@contextmanager
def _no_lock() -> Iterator[None]:
    yield None
