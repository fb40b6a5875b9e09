"""What the job page shows about one job home, gathered through ops/ (the same reads as the CLI).

Every section is read on its own: a broker that does not answer leaves the
partition table with an error and the rest of the page intact. Nothing here
writes to the job home or takes its lock. Secrets never reach the result: the
Kafka configuration is used, not returned, and error texts are masked with its
secret values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.redaction import redact, redact_text, secret_values
from airflow_kafka_stream.core.sink import sink_from_spec
from airflow_kafka_stream.errors import InvalidInputError, StreamError
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage.jobhome import JobHome

# Lazy imports: ops/ and checkpoint.savepoints (storage, kafka) wait for a page to be drawn: every Airflow component
# that loads plugins imports this module through plugins.job_page.

#: Savepoints whose checksums the page checks on each view (newest first); older ones say "not checked".
VALIDATED_SAVEPOINTS = 5
#: Operations of the history shown, newest first.
HISTORY_ROWS = 30


def job_view(home_url: str, kafka_config: dict[str, Any], storage_options: dict[str, Any] | None = None,
             now: datetime | None = None) -> dict[str, Any]:
    """The job page's data for one job home (JSON-ready)."""
    now = now or datetime.now(UTC)
    secrets = secret_values(kafka_config) + secret_values(storage_options or {})
    view: dict[str, Any] = {"job_home": home_url, "errors": {}}

    def section(name: str, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except (StreamError, OSError, ValueError, KeyError) as exc:
            view["errors"][name] = redact_text(str(exc), secrets)
            return None

    home = section("job_home", lambda: _home(home_url, storage_options))
    if home is None:
        return view
    view["summary"] = section("summary", lambda: summary(home, now))
    checked = section("partitions", lambda: verified(home, kafka_config))
    view["partitions"], view["group"] = (checked["partitions"], checked["group"]) if checked else (None, None)
    view["lag_samples"] = _lag_samples(home) if view["summary"] else []
    view["time_lag_samples"] = _time_lag_samples(home) if view["summary"] else []
    view["objective"] = section("objective", lambda: objective(home))
    view["state"] = section("state", lambda: state(home))
    view["savepoints"] = section("savepoints", lambda: savepoints(home))
    view["history"] = section("history", lambda: history(home))
    return view


def _lag_samples(home: JobHome) -> list[Any]:
    """The recent lag samples the running job keeps in its status, for the page's plot."""
    status = home.status_document()
    return list(status.lag_samples) if status is not None else []


def _time_lag_samples(home: JobHome) -> list[Any]:
    """The recent time lag measurements ([epoch, max seconds]) the running job keeps, for the seconds plot."""
    status = home.status_document()
    return list(status.time_lag_samples) if status is not None else []


def objective(home: JobHome) -> dict[str, Any] | None:
    """The lag objective recorded in the job home, its last check and the breaches (ops.objective)."""
    from airflow_kafka_stream.ops.objective import breaches, recorded_objective

    found = recorded_objective(home)
    if found is None:
        return None
    return {**found.to_dict(), "last_check": (home.objective() or {}).get("last_check"), "breaches": breaches(home)}


def _home(url: str, storage_options: dict[str, Any] | None) -> JobHome:
    home = JobHome(url, storage_options)
    home.require()
    return home


def summary(home: JobHome, now: datetime) -> dict[str, Any]:
    """State, version, heartbeat age, generation and last committed batch (ops.inspect.job_status)."""
    from airflow_kafka_stream.ops.inspect import job_status

    status = job_status(home, now)
    return {
        "job": status.job,
        "state": status.state or "NOT STARTED",  # the one shown state (core.liveness.shown_state)
        "recorded_state": status.recorded_state,
        "state_reason": status.state_reason,
        "app_version": status.app_version,
        "heartbeat_age_seconds": status.heartbeat_age_seconds,
        "generation": status.generation,
        "last_batch_id": status.last_batch_id,
        "group": status.group,
        "topics": status.topics,
        "error": status.error,
        "read_placement": (status.read_placement or {}).get("reason"),
        "time_lag_seconds": status.time_lag.max_seconds if status.time_lag is not None else None,
        "metrics": status.metrics,
        "standby": status.standby,
        **outputs(home),
    }


def outputs(home: JobHome) -> dict[str, Any]:
    """What the job writes: its sink as job.json records it, the transactional Kafka sink's last committed batch
    and transactions, and the output asset's announced windows (from the driver's status)."""
    try:
        sink = sink_from_spec(home.spec() if home.exists() else {})
    except InvalidInputError:
        sink = None
    written = home.status() or {}
    return {"sink": sink.describe() if sink is not None else None, "kafka_sink": written.get("kafka_sink"),
            "assets": written.get("assets")}


def verified(home: JobHome, kafka_config: dict[str, Any]) -> dict[str, Any]:
    """One verify (ops.verify): ``partitions``, one row each (checkpoint and group offsets, watermarks, lag, the
    status), and ``group``, the group's state and members as its coordinator describes them (or None)."""
    from airflow_kafka_stream.ops import verify
    from airflow_kafka_stream.ops.context import build_context

    ctx = build_context(job_home=home.url, client_config=kafka_config, storage_options=home.storage_options)
    result = verify.verify(ctx, record=False)  # the page judges the window but keeps no look (it writes nothing)
    rows = []
    for verdict in result.partitions:
        seen = verdict.observation
        rows.append({"topic": seen.partition.topic, "partition": seen.partition.partition,
                     "checkpoint_offset": seen.checkpoint_offset, "group_offset": seen.group_offset,
                     "low": seen.low, "high": seen.high, "lag": seen.lag,
                     "time_lag_seconds": (result.time_lag_seconds or {}).get(seen.partition),
                     "status": str(verdict.status), "detail": verdict.detail})
    described = result.group_description
    return {"partitions": rows, "group": described.to_dict() if described is not None else None}


def state(home: JobHome) -> dict[str, Any]:
    """What the current checkpoint's state holds: operators, stores, partitions, versions, schemas (ops.inspect)."""
    from airflow_kafka_stream.ops.inspect import state as checkpoint_state

    return checkpoint_state(home).to_dict()


def savepoints(home: JobHome) -> list[dict[str, Any]]:
    """Every savepoint, newest first, with its size; checksums checked for the newest few."""
    from airflow_kafka_stream.checkpoint.savepoints import incomplete_savepoints
    from airflow_kafka_stream.ops import savepoints as ops_savepoints

    rows = []
    for index, manifest in enumerate(sorted(ops_savepoints.list_all(home), key=lambda m: m.created_at,
                                            reverse=True)):
        valid: bool | None = None
        problem = None
        if index < VALIDATED_SAVEPOINTS:
            try:
                ops_savepoints.validate(home, manifest.id)
                valid = True
            except StreamError as exc:
                valid, problem = False, str(exc)
        rows.append({"id": manifest.id, "batch_id": manifest.batch_id, "created_at": manifest.created_at,
                     "app_version": manifest.app_version, "size_bytes": _size(home, manifest.id),
                     "valid": valid, "problem": problem})
    for name in incomplete_savepoints(home.savepoints_url, home.storage_options):
        rows.append({"id": name, "batch_id": None, "created_at": None,
                     "app_version": None, "size_bytes": None, "valid": False,
                     "problem": "incomplete: no manifest (an interrupted savepoint)"})
    return rows


def _size(home: JobHome, savepoint_id: str) -> int | None:
    try:
        return int(home.fs.du(home.p(*layout.savepoint(savepoint_id)), total=True))
    except (OSError, ValueError):
        return None


def history(home: JobHome) -> list[dict[str, Any]]:
    """The newest operations: when, what, who, result, and their (already redacted) arguments and error."""
    rows = []
    for record in reversed(home.history()[-HISTORY_ROWS:]):
        rows.append({"started_at": record.get("started_at"), "operation": record.get("operation"),
                     "by": record.get("by"), "result": record.get("result"), "seconds": record.get("seconds"),
                     "args": json.dumps(redact(record.get("args") or {}), sort_keys=True, default=str),
                     "error": record.get("error"), "airflow_run": (record.get("airflow") or {}).get("run_id")})
    return rows
