"""ops.hot_standby without Spark: the keeper launches a hot standby for a running job that wants one, one at a
time, and a standby that keeps dying is launched again only after a doubling backoff, never in a loop."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.watchdog import Policy
from airflow_kafka_stream.ops.hot_standby import LAUNCH_OPERATION, keep_hot_standby, set_wish
from airflow_kafka_stream.ops.inspect import job_status
from airflow_kafka_stream.ops.launcher import LaunchedDriver, Submission
from airflow_kafka_stream.ops.submit import record_submission
from airflow_kafka_stream.storage.jobhome import STANDBY_RECORD, JobHome


class SleepLauncher:
    """Starts a sleeping process for each launch (a standby that never registers) and keeps them."""

    def __init__(self) -> None:
        self.launched: list[subprocess.Popen] = []

    def launch(self, submission: Submission, log: str, extra_env=None) -> LaunchedDriver:
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        self.launched.append(proc)
        return LaunchedDriver(proc.pid, socket.gethostname(), log)

    def kill_last(self) -> None:
        self.launched[-1].kill()
        self.launched[-1].wait()


@pytest.fixture
def running_job(tmp_path):
    """A job home whose driver (this test's process) runs and heart-beats, and that wants a hot standby."""
    home = JobHome(str(tmp_path))
    (tmp_path / "job.json").write_text(json.dumps({"job": "orders", "version": "1"}))
    (tmp_path / "status.json").write_text(json.dumps({
        "job": "orders", "state": "RUNNING", "pid": os.getpid(), "host": socket.gethostname(),
        "heartbeat_epoch": time.time() + 3600, "heartbeat_interval_seconds": 5}))  # fresh for the whole test
    record_submission(home, Submission("1"), datetime.now(UTC))
    launcher = SleepLauncher()
    yield home, launcher
    for proc in launcher.launched:
        proc.kill()
        proc.wait()


def launches(home: JobHome) -> int:
    return [r["operation"] for r in home.history()].count(LAUNCH_OPERATION)


def test_nothing_is_launched_for_a_job_that_wants_no_hot_standby(running_job):
    home, launcher = running_job
    assert keep_hot_standby(home, launcher) is None and launcher.launched == []


def test_one_at_a_time_and_a_dying_one_relaunched_only_after_the_backoff(running_job):
    home, launcher = running_job
    set_wish(home, True, Policy(max_restarts=5))
    first = keep_hot_standby(home, launcher)
    assert first is not None and home.read_control(STANDBY_RECORD)["hot"]["policy"]["max_restarts"] == 5
    assert keep_hot_standby(home, launcher) is None, "one live standby is enough"
    launcher.kill_last()  # it died before registering
    assert keep_hot_standby(home, launcher) is None, "within the backoff of its launch"
    assert launches(home) == 1
    shown = job_status(home).standby
    assert (shown["hot"], shown["state"]) == (True, "NONE") and "has none live" in shown["note"], shown
    later = datetime.now(UTC) + timedelta(seconds=31)
    assert keep_hot_standby(home, launcher, now=later) is not None, "after the 30 s backoff"
    launcher.kill_last()
    # Both launches are recorded at the real time: 31 s later the second one's backoff (60 s) still holds.
    assert keep_hot_standby(home, launcher, now=later) is None, "the backoff doubled"
    assert launches(home) == 2


def test_a_submit_without_the_wish_clears_it(running_job):
    home, launcher = running_job
    set_wish(home, True)
    set_wish(home, None)
    assert home.spec()["hot_standby"] is not None, "None keeps the job's setting"
    set_wish(home, False)
    assert keep_hot_standby(home, launcher) is None and launcher.launched == []
