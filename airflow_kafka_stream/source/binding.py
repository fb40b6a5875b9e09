"""A query's binding: the options of each start of a DataFrame defined once and started more than once.

Spark pickles a Python data source when its DataFrame is defined and creates the stream reader from that
instance at every query start. A warm standby defines the job's query before it may take the job, starts it
once as a rehearsal (on a scratch checkpoint, with its own stop handshake and a bounded stretch of records)
and again for real once it has the go; the options that differ between those starts (``startingOffsets``,
``drainPath``, ``startOffsetsPath``, ``maxOffsetsPerTrigger``, ``rehearsalEndOffsets``) are read at each
start from a small JSON file on the driver's host, named by the ``bindingPath`` option. The runtime rewrites
the file only between queries (never while one runs: Spark creates readers again during a query).

A standby also starts the job's query ahead of its go, on the checkpoint it expects to take over, with the
file *waiting*: Spark then does everything of a query's start up to the source (its plan, the Python process
that serves the source, this package's imports) while the old version still runs, and the source's
``streamReader`` waits there, before Spark has read anything of the checkpoint. After the go the runtime
writes the run's options and the query goes on; a query it cannot use (another generation was chosen, the
standby ended) is *cancelled*: its reader raises and the runtime stops it, having read and written nothing.

A source that holds there has *answered*: it writes a small file beside the binding file (:func:`answered`),
from Spark's Python process that serves it, once warm. The standby reports READY only after that answer, so
READY means that process came up and connected back to Spark (under load it may not: then the standby fails
before the old version is stopped, instead of the new version failing after it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping

from airflow_kafka_stream.errors import InvalidInputError

BINDING_OPTION = "bindingPath"

#: The key of a binding file that holds no options yet: "waiting" (with "until", an epoch) or "cancelled".
PENDING_KEY = "bindingPending"
WAITING = "waiting"
CANCELLED = "cancelled"
#: How often a reader waiting for its binding looks at the file (each look's delay is an upgrade's downtime).
WAIT_POLL_SECONDS = 0.005


def binding_path(options: Mapping[str, str]) -> str | None:
    """The ``bindingPath`` option (Spark's option names are case-insensitive)."""
    for key, value in options.items():
        if str(key).lower() == BINDING_OPTION.lower():
            return str(value)
    return None


def bound_options(options: Mapping[str, str], while_waiting: Callable[[], None] | None = None) -> dict[str, str]:
    """The options as given at definition, with the binding file's options replacing them; a file still waiting
    for them is waited for, ``while_waiting`` run once first (best effort: what it raises is ignored)."""
    path = binding_path(options)
    base = {str(key): str(value) for key, value in options.items()}
    if path is None:
        return base
    bound = _read(path)
    if PENDING_KEY in bound:
        bound = _wait_while_pending(path, bound, while_waiting)
    lowered = {str(key).lower() for key in bound}
    kept = {key: value for key, value in base.items() if key.lower() not in lowered}
    return {**kept, **{str(key): str(value) for key, value in bound.items()}, BINDING_OPTION: path}


def write_binding(path: str, options: Mapping[str, str]) -> None:
    """Write the options of the next start (atomically: a reader sees the old file or the new one)."""
    _write(path, {key: str(value) for key, value in options.items() if key != BINDING_OPTION})


def write_waiting(path: str, wait_seconds: float) -> None:
    """Make a query started now wait in its source for :func:`write_binding` (at most ``wait_seconds``); the
    answer of an earlier start is removed first, so :func:`answered` tells of this one."""
    try:
        os.remove(answer_path(path))
    except FileNotFoundError:
        pass
    _write(path, {PENDING_KEY: WAITING, "until": time.time() + wait_seconds})


def answer_path(path: str) -> str:
    """Where a source waiting for its binding says it is up (beside the binding file)."""
    return f"{path}.answered"


def answered(path: str) -> dict | None:
    """The answer of the source waiting on ``path`` (its process id and time), None before it answered."""
    try:
        with open(answer_path(path), encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):  # none yet (written whole by a rename; a damaged one is no answer)
        return None


def write_cancelled(path: str) -> None:
    """Make a query waiting for its binding fail in its source, before it reads anything."""
    _write(path, {PENDING_KEY: CANCELLED})


def _write(path: str, document: Mapping[str, object]) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    os.replace(temporary, path)


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise InvalidInputError(f"option bindingPath: {path} does not exist; it is written by the job runtime "
                                "before each start of its query, so start the query with runtime.run") from None
    except ValueError as exc:
        raise InvalidInputError(f"option bindingPath: {path} is not JSON ({exc})") from None


def _wait_while_pending(path: str, bound: dict, while_waiting: Callable[[], None] | None) -> dict:
    """The options once the file holds them, ``while_waiting`` run once first, then the answer written; raises
    when the start is cancelled, outlives its wait, or the process that started this one (Spark's JVM) is gone,
    so a waiting source never outlives its query."""
    parent = os.getppid()
    if while_waiting is not None:
        try:
            while_waiting()
        except Exception:  # noqa: BLE001, S110 - a warm-up; the run does the same work itself when it failed
            pass
    _write(answer_path(path), {"pid": os.getpid(), "at": time.time()})
    bound = _read(path)
    while PENDING_KEY in bound:
        if bound[PENDING_KEY] != WAITING:
            raise InvalidInputError("this query was started ahead of a standby's go and is not used (the standby "
                                    "took another checkpoint, or ended); it read and wrote nothing")
        if time.time() > float(bound.get("until") or 0):
            raise InvalidInputError("this query was started ahead of a standby's go that did not come in time; "
                                    "it read and wrote nothing")
        if os.getppid() != parent:
            raise SystemExit("the driver that started this query is gone")
        time.sleep(WAIT_POLL_SECONDS)
        bound = _read(path)
    return bound
