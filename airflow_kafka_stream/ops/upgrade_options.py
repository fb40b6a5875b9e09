"""How an upgrade runs: its options with their one set of defaults, validated once, and how often it looks.

Kept apart from ``ops.upgrade`` (which starts drivers and waits) so that the command line's parser and the
Airflow task group read the defaults without importing the upgrade's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.health import HealthSpec
from airflow_kafka_stream.core.values import seconds
from airflow_kafka_stream.errors import InvalidInputError

#: How often the stop before a handover looks for the old version's STOPPED: every look's delay is downtime
#: (a read of status.json; the drain lasts about a second).
HANDOVER_POLL_SECONDS = 0.1
#: The same for a cold upgrade: the new version is submitted once the old one is seen stopped.
COLD_STOP_POLL_SECONDS = 1.0


def stop_poll_seconds(poll_seconds: float, standby: bool) -> float:
    """How often the upgrade's stop looks at the old version: at most ``poll_seconds``, and more often than
    that because each look's delay adds to the downtime (a standby waits for the go; a cold start waits too)."""
    return min(float(poll_seconds), HANDOVER_POLL_SECONDS if standby else COLD_STOP_POLL_SECONDS)


@dataclass(frozen=True)
class UpgradeOptions:
    """How an upgrade runs, with its defaults: the command line's flags and the task group's arguments take
    theirs from here (:data:`DEFAULTS`), and validation happens once, on construction."""

    standby: bool = True
    drop_state: bool = False
    allow_sink_batch_log: bool = False
    rollback: bool = True
    takeover_stopped: bool = False
    health_batches: int = 3
    health_window_seconds: float = 60.0
    health_startup_seconds: float = 300.0
    health_timeout_seconds: float = 900.0
    stop_timeout_seconds: float = 300.0
    start_timeout_seconds: float = 600.0
    standby_ready_timeout_seconds: float = 600.0
    rehearsal_timeout_seconds: float = 300.0
    poll_seconds: float = 1.0

    def rehearsal_request(self, check: bool = False) -> dict[str, Any]:
        """What the standby's rehearsal is told (``runtime/rehearsal.py``)."""
        return {"drop_state": self.drop_state, "timeout_seconds": self.rehearsal_timeout_seconds, "check": check}

    def __post_init__(self) -> None:
        for name in ("health_timeout_seconds", "stop_timeout_seconds", "start_timeout_seconds",
                     "standby_ready_timeout_seconds", "rehearsal_timeout_seconds", "poll_seconds"):
            seconds(getattr(self, name), name)
        try:
            self.health_spec()
        except ValueError as exc:
            raise InvalidInputError(f"health gate: {exc}", setting="health_batches") from None

    def health_spec(self, newer_than: datetime | None = None) -> HealthSpec:
        return HealthSpec(int(self.health_batches), float(self.health_window_seconds), 0, newer_than,
                          startup_seconds=float(self.health_startup_seconds))


DEFAULTS = UpgradeOptions()
