"""ops.standby.hand_over without Spark: a job that stopped by itself is taken over only when the caller says so."""

from __future__ import annotations

import json
import socket
import subprocess
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops.results import StopResult
from airflow_kafka_stream.ops.standby import StandbyHandle, end_standby, give_up, hand_over
from airflow_kafka_stream.storage.jobhome import STANDBY_GO, STANDBY_RECORD, JobHome


@pytest.fixture
def ready_standby(tmp_path):
    """A job home whose job crashed, and a READY standby (a sleeping process stands in for its driver)."""
    home = JobHome(str(tmp_path))
    (tmp_path / "job.json").write_text(json.dumps({"job": "standby-test", "version": "1"}))
    (tmp_path / "status.json").write_text(json.dumps({"state": "FAILED", "error": "crashed"}))
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    now = datetime.now(UTC)
    handle = StandbyHandle("tok", "2", proc.pid, socket.gethostname(), str(tmp_path / "standby.log"), now.isoformat())
    home.write_control(STANDBY_RECORD, {"state": rules.StandbyState.READY, "token": "tok", "pid": proc.pid,
                                        "host": socket.gethostname(), "heartbeat_epoch": now.timestamp(),
                                        "heartbeat_interval_seconds": 5})
    yield home, handle, proc
    proc.kill()
    proc.wait()


def test_a_job_that_stopped_by_itself_is_not_taken_over_and_the_standby_is_ended(ready_standby):
    home, handle, proc = ready_standby
    with pytest.raises(JobStateError, match="does not take over a job that stopped by itself unless told to"):
        hand_over(home, handle, StopResult.from_dict({"was_running": False, "state": "FAILED"}))
    assert home.read_control(STANDBY_RECORD)["state"] == rules.StandbyState.ENDED
    assert proc.wait(10) is not None, "its process was ended"
    assert home.read_control(STANDBY_GO) is None, "the cancel went with its standby: nothing is left lying"


def test_a_standby_on_another_host_keeps_its_cancel(ready_standby):
    """Its end cannot be seen from here: the cancel is what tells it to end."""
    home, handle, _ = ready_standby
    home.write_control(STANDBY_RECORD, {**home.read_control(STANDBY_RECORD), "host": "elsewhere"})
    end_standby(home, replace(handle, host="elsewhere"), "the upgrade check is done")
    go = home.read_control(STANDBY_GO)
    assert (go["action"], go["token"]) == (rules.CANCEL, "tok")


def test_told_to_it_takes_over_a_job_that_stopped_by_itself(ready_standby):
    home, handle, _ = ready_standby
    result = hand_over(home, handle, StopResult.from_dict({"was_running": False, "state": "FAILED"}), takeover_stopped=True)
    go = home.read_control(STANDBY_GO)
    assert (go["action"], go["token"], result.action) == (rules.GO, "tok", "handed-over")


def test_a_standby_that_failed_gives_its_reason_apart_from_its_log(ready_standby):
    """The CLI prints the reason and the log's path (its end with --verbose); a task log gets both."""
    home, handle, _ = ready_standby
    with open(handle.driver_log, "w") as log:
        log.write("Traceback (most recent call last):\n  ...\nValueError: boom\n")
    error = give_up(home, handle, "the standby failed: ValueError: boom")
    assert "Traceback" not in error.reason and error.reason.endswith("no savepoint taken)"), error.reason
    assert (error.log, error.log_tail) == (handle.driver_log, "Traceback (most recent call last):\n  ...\nValueError: boom\n")
    assert str(error).endswith(error.log_tail)
