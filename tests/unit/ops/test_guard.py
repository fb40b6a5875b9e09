"""The running-job guard reads the job's own heartbeat (the consumer group proves nothing)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops.guard import ensure_not_running, job_is_running
from airflow_kafka_stream.storage.jobhome import JobHome

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def home_with(tmp_path, **status) -> JobHome:
    (tmp_path / "status.json").write_text(json.dumps(status))
    return JobHome(str(tmp_path))


@pytest.mark.parametrize(
    ("state", "age", "interval", "running"),
    [
        pytest.param("RUNNING", 3, 5, True, id="1-fresh-heartbeat-runs"),
        pytest.param("RUNNING", 120, 5, False, id="2-stale-heartbeat-means-the-driver-died"),
        pytest.param("RUNNING", 120, 60, True, id="3-a-slow-heartbeat-is-judged-by-its-own-interval"),
        pytest.param("DRAINING", 1, 5, True, id="4-draining-still-runs"),
        pytest.param("STOPPED", 1, 5, False, id="5-stopped-is-not-running-whatever-the-heartbeat"),
        pytest.param("FAILED", 1, 5, False, id="6-failed-is-not-running"),
    ],
)
def test_job_is_running(tmp_path, state, age, interval, running):
    home = home_with(tmp_path, state=state, heartbeat_epoch=NOW.timestamp() - age,
                     heartbeat_interval_seconds=interval)
    assert job_is_running(home, NOW)[0] is running


def test_no_status_is_not_running(tmp_path):
    assert job_is_running(JobHome(str(tmp_path)), NOW) == (False, None)


def test_refusal_names_the_state_and_the_way_out(tmp_path):
    home = home_with(tmp_path, state="RUNNING", heartbeat_epoch=NOW.timestamp(), application_id="local-1",
                     heartbeat="2026-11-22T12:00:00+00:00")
    with pytest.raises(JobStateError) as err:
        ensure_not_running(home, operation="an offset reset", now=NOW)
    message = str(err.value)
    assert "RUNNING" in message and "local-1" in message and "stop operation" in message
