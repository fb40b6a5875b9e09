"""What the Airflow tasks emit through Airflow's own ``Stats`` (StatsD or OpenTelemetry, as ``[metrics]`` says).

Small and named ``airflow_kafka_stream.*`` (docs/metrics.md): an upgrade's duration and downtime, rollbacks,
watchdog restarts and resets executed, each tagged with the job (``stream_job``, as the driver's metrics). Emitting
never fails a task.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_kafka_stream.core.metrics_settings import JOB_LABEL, PREFIX

# Lazy imports: Airflow's Stats is looked up when a metric is emitted, where a failure to import it (an older
# Airflow: the fallback) is caught and never fails a task.

log = logging.getLogger(__name__)

UPGRADE_DURATION = f"{PREFIX}.upgrade.duration"
UPGRADE_DOWNTIME = f"{PREFIX}.upgrade.downtime"
UPGRADE_ROLLBACKS = f"{PREFIX}.upgrade.rollbacks"
WATCHDOG_RESTARTS = f"{PREFIX}.watchdog.restarts"
RESETS_EXECUTED = f"{PREFIX}.reset.executed"


def _stats():
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # Airflow before the task SDK's observability
        from airflow.stats import Stats
    return Stats


def incr(name: str, job: str | None) -> None:
    try:
        _stats().incr(name, tags={JOB_LABEL: job or ""})
    except Exception as exc:  # noqa: BLE001 - a metric must never fail a task
        log.warning("could not emit %s: %s", name, exc)


def timing(name: str, seconds: float | None, job: str | None) -> None:
    if seconds is None:
        return
    try:
        _stats().timing(name, timedelta(seconds=seconds), tags={JOB_LABEL: job or ""})
    except Exception as exc:  # noqa: BLE001 - a metric must never fail a task
        log.warning("could not emit %s: %s", name, exc)


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def upgrade_times(history: Sequence[Mapping[str, Any]], first_batch_epochs: Sequence[float],
                  now: datetime) -> tuple[float | None, float | None]:
    """(duration, downtime) of an upgrade that just ended, in seconds; None when it cannot be told.

    Both start at the upgrade's stop request (its last ``stop-request`` record that succeeded): from then
    on the old version plans no new batch. The duration runs to ``now`` (the outcome); the downtime to the
    new version's first batch after the request (the first of ``first_batch_epochs``, the new driver's
    batch times).
    """
    request = next((r for r in reversed(history) if r.get("operation") == "stop-request" and r.get("result") == "ok"),
                   None)
    began = _time(request.get("started_at")) if request else None
    if began is None:
        return None, None
    first = next((epoch for epoch in sorted(first_batch_epochs) if epoch >= began.timestamp()), None)
    return (now - began).total_seconds(), (first - began.timestamp() if first is not None else None)


def upgrade_emitted(home) -> None:
    """Emit a healthy upgrade's duration and downtime from the job home's history and the new driver's status."""
    try:
        status = home.status_document()
        epochs = [float(s[0]) for s in (status.lag_samples if status else ()) if isinstance(s, list | tuple) and s]
        duration, downtime = upgrade_times(home.history(), epochs, datetime.now(UTC))
        job = home.spec().get("job")
    except Exception as exc:  # noqa: BLE001 - a metric must never fail a task
        log.warning("could not measure the upgrade for its metrics: %s", exc)
        return
    timing(UPGRADE_DURATION, duration, job)
    timing(UPGRADE_DOWNTIME, downtime, job)
    log.info("upgrade took %s s, downtime %s s", None if duration is None else round(duration, 1),
             None if downtime is None else round(downtime, 1))
