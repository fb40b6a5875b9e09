"""core.standby: when a standby counts as live (a second one is refused) and what a wait for READY concludes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.standby import (
    Readiness,
    StandbyState,
    is_live,
    judge_ready,
)

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def record(state: str, beat_age: float | None = 1.0, launched_ago: float = 30.0, token: str = "t") -> dict:
    doc = {"state": state, "token": token, "pid": 7, "host": "h", "heartbeat_interval_seconds": 1.0,
           "launched_at": (NOW - timedelta(seconds=launched_ago)).isoformat(), "error": "boom"}
    if beat_age is not None:
        doc["heartbeat_epoch"] = (NOW - timedelta(seconds=beat_age)).timestamp()
    return doc


LIVE = [
    # id, record, process alive, expected, why
    ("none", None, None, False, "no standby was ever started"),
    ("launched-starting-jvm", record(StandbyState.LAUNCHED, beat_age=None), True, True, "a JVM takes seconds before it beats"),
    ("launched-process-gone", record(StandbyState.LAUNCHED, beat_age=None), False, False, "a broken version exited"),
    ("launched-past-grace", record(StandbyState.LAUNCHED, beat_age=None, launched_ago=900), None, False,
     "silent past the start grace on another host: gone"),
    ("ready-beating", record(StandbyState.READY), True, True, "it waits for its go"),
    ("ready-other-host", record(StandbyState.READY), None, True, "the heartbeat decides where the pid cannot be checked"),
    ("ready-stale", record(StandbyState.READY, beat_age=60), None, False, "killed on another host"),
    ("ready-killed-here", record(StandbyState.READY), False, False, "a dead process does not wait for anything"),
    ("active", record(StandbyState.ACTIVE), True, False, "it became the job's driver: a new standby may come"),
    ("ended", record(StandbyState.ENDED), True, False, "ended by its upgrade"),
]


@pytest.mark.parametrize(("case", "doc", "alive", "expected", "why"), LIVE, ids=[c[0] for c in LIVE])
def test_is_live(case, doc, alive, expected, why):
    assert is_live(doc, alive, NOW) is expected, why


READINESS = [
    ("not-registered", None, True, Readiness.WAITING, "the driver is starting"),
    ("exited-unregistered", None, False, Readiness.FAILED, "a broken application"),
    ("other-token", record(StandbyState.READY, token="other"), True, Readiness.WAITING, "another standby's record is not ours"),
    ("launched", record(StandbyState.LAUNCHED, beat_age=None), True, Readiness.WAITING, "the JVM starts"),
    ("starting", record(StandbyState.STARTING), True, Readiness.WAITING, "it warms up"),
    ("ready", record(StandbyState.READY), True, Readiness.READY, "ready for the go"),
    ("ready-killed", record(StandbyState.READY), False, Readiness.FAILED, "killed while waiting: its record still says READY"),
    ("ready-stale", record(StandbyState.READY, beat_age=60), None, Readiness.FAILED, "killed on another host"),
    ("failed", record(StandbyState.FAILED), True, Readiness.FAILED, "it reported its failure"),
    ("ended", record(StandbyState.ENDED), None, Readiness.FAILED, "it was ended"),
    ("starting-exited", record(StandbyState.STARTING), False, Readiness.FAILED, "killed while warming up"),
    ("starting-stale", record(StandbyState.STARTING, beat_age=60), None, Readiness.FAILED, "hangs or died on another host"),
]


@pytest.mark.parametrize(("case", "doc", "alive", "expected", "why"), READINESS, ids=[c[0] for c in READINESS])
def test_judge_ready(case, doc, alive, expected, why):
    assert judge_ready(doc, "t", alive, NOW).outcome is expected, why


@pytest.mark.parametrize(("age", "interval", "skew", "stale"), [
    (9, 1, None, False), (11, 1, None, True),  # the floor: 10 s
    (35, 10, None, False), (41, 10, None, True),  # four of a slow standby's intervals
    (25, 1, 20, False), (31, 1, 20, True),  # the skew its job declared, as for a job's driver
])
def test_a_standby_is_stale_by_the_same_rule_as_a_driver(age, interval, skew, stale):
    from airflow_kafka_stream.core.liveness import is_stale
    from airflow_kafka_stream.core.standby import STALE_FLOOR_SECONDS, heartbeat_of, heartbeat_stale
    from airflow_kafka_stream.core.status_document import StatusDocument

    record = {"state": "READY", "heartbeat_epoch": NOW.timestamp() - age, "heartbeat_interval_seconds": interval,
              **({"clock_skew_seconds": skew} if skew is not None else {})}
    assert heartbeat_stale(record, NOW) is stale
    assert is_stale(heartbeat_of(record), STALE_FLOOR_SECONDS, NOW) is stale
    driver = StatusDocument.parse({**record, "state": "RUNNING"})
    assert is_stale(driver, STALE_FLOOR_SECONDS, NOW) is stale, "a driver's status with the same numbers"
