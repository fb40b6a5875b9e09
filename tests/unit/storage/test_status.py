"""The liveness rule the control plane relies on, and the status file round trip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.storage.status import is_alive, read_status, write_status

NOW = 1_800_000_000.0


def beat(state, age=None, **extra):
    status = {"state": state, **extra}
    if age is not None:
        status["heartbeat_epoch"] = NOW - age
    return status


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(None, False, id="1-no-status-file-means-never-started-or-removed"),
        pytest.param({}, False, id="2-empty-status-has-no-state"),
        pytest.param(beat("RUNNING", age=1), True, id="3-running-with-fresh-heartbeat"),
        pytest.param(beat("STARTING", age=0), True, id="4-starting-counts-as-running-query-may-be-planning"),
        pytest.param(beat("DRAINING", age=2), True, id="5-draining-is-still-running-a-batch"),
        pytest.param(beat("RUNNING", age=30), False, id="6-stale-heartbeat-driver-died-silently"),
        pytest.param(beat("RUNNING", age=10), True, id="7-heartbeat-exactly-at-max-age-is-still-fresh"),
        pytest.param(beat("STOPPED", age=1), False, id="8-stopped-even-with-fresh-heartbeat"),
        pytest.param(beat("FAILED", age=1), False, id="9-failed-even-with-fresh-heartbeat"),
        pytest.param(beat("RUNNING"), False, id="10-no-heartbeat-cannot-prove-life"),
        pytest.param(beat("RUNNING", heartbeat_epoch="soon"), False, id="11-non-numeric-heartbeat-is-unusable"),
        pytest.param(beat("RUNNING", heartbeat_epoch=True), False, id="12-boolean-heartbeat-is-unusable"),
        pytest.param(beat("RUNNING", age=-5), True, id="13-heartbeat-from-future-clock-skew-counts-as-fresh"),
        pytest.param(beat("PAUSED", age=1), False, id="14-unknown-state-is-not-running"),
    ],
)
def test_is_alive(status, expected):
    assert is_alive(status, NOW, max_age_seconds=10) is expected


def test_is_alive_accepts_datetime_now():
    now = datetime.fromtimestamp(NOW, UTC)
    assert is_alive(beat("RUNNING", age=3), now, 5)
    assert not is_alive(beat("RUNNING", age=6), now, 5)


def test_write_then_read_round_trips_and_leaves_no_temp_files(tmp_path):
    home = tmp_path / "job"
    assert read_status(str(home)) is None
    write_status(str(home), {"state": "RUNNING", "heartbeat_epoch": NOW})
    write_status(str(home), {"state": "STOPPED", "heartbeat_epoch": NOW + 1})
    assert read_status(str(home)) == {"state": "STOPPED", "heartbeat_epoch": NOW + 1}
    assert sorted(p.name for p in home.iterdir()) == ["status.json"]


def test_unreadable_status_reads_as_none(tmp_path):
    (tmp_path / "status.json").write_text('{"state": "RUNN')
    assert read_status(str(tmp_path)) is None


@pytest.mark.parametrize(("status", "alive"), [
    pytest.param(beat("RUNNING", age=14, clock_skew_seconds=5), True, id="1-within-limit-plus-declared-skew"),
    pytest.param(beat("RUNNING", age=16, clock_skew_seconds=5), False, id="2-past-limit-plus-declared-skew"),
    pytest.param(beat("RUNNING", age=11), False, id="3-no-declared-skew-one-host"),
])
def test_the_guard_allows_the_declared_clock_skew(status, alive):
    """The control plane (guard) reads heartbeats written on another host: it adds the skew the job declared."""
    from airflow_kafka_stream.storage.status import max_heartbeat_age

    assert is_alive(status, NOW, max_heartbeat_age(status, 10)) is alive


def test_a_driver_is_gone_only_when_its_python_process_and_its_jvm_are_both_gone_on_this_host():
    """Real processes of this host: a JVM outlives its Python driver for a moment and may still commit a batch."""
    import socket
    import subprocess

    from airflow_kafka_stream.storage.processes import driver_gone
    from airflow_kafka_stream.storage.status import is_running

    here = socket.gethostname()
    gone = subprocess.Popen(["true"])
    gone.wait()
    living = subprocess.Popen(["sleep", "30"])
    try:
        fresh = beat("RUNNING", age=1, host=here)
        cases = [
            ({**fresh, "pid": gone.pid, "jvm_pid": gone.pid}, True, "1-both-gone"),
            ({**fresh, "pid": gone.pid, "jvm_pid": living.pid}, False, "2-jvm-still-alive-may-still-commit"),
            ({**fresh, "pid": living.pid, "jvm_pid": gone.pid}, False, "3-python-alive"),
            ({**fresh, "pid": gone.pid}, False, "4-no-jvm-pid-an-older-runtime-the-heartbeat-decides"),
            ({**fresh, "pid": gone.pid, "jvm_pid": gone.pid, "host": "elsewhere"}, False, "5-pids-of-another-host"),
            (None, False, "6-no-status"),
        ]
        for status, expected, why in cases:
            assert driver_gone(status) is expected, why
            if status is not None:
                assert is_running(status, NOW, 10) is (not expected), why
    finally:
        living.kill()
        living.wait()
