"""spark.standby without Spark: a second standby refuses to register; the go, a cancel and the job stopping by
itself, as the driver sees them in the job home (local files, real threads)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.runtime.standby import Standby
from airflow_kafka_stream.storage.jobhome import STANDBY_GO, STANDBY_RECORD, JobHome


def standing_by(home: JobHome, token: str, **kwargs) -> tuple[Standby, threading.Thread, dict]:
    standby = Standby(home, token, "2", heartbeat_seconds=0.2, **kwargs)
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["go"] = standby.stand_by(lambda: None)
        except JobStateError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while (home.read_control(STANDBY_RECORD) or {}).get("state") != rules.StandbyState.READY and time.monotonic() < deadline:
        time.sleep(0.02)
    return standby, thread, outcome


def test_a_second_standby_is_refused_while_the_first_is_live(tmp_path):
    home = JobHome(str(tmp_path))
    first, thread, _ = standing_by(home, "first")
    with pytest.raises(JobStateError, match="two standbys for one job are refused"):
        Standby(home, "second", "3", heartbeat_seconds=0.2).stand_by(lambda: None)
    assert home.read_control(STANDBY_RECORD)["token"] == "first", "the refused one wrote nothing"
    home.write_control(STANDBY_GO, {"token": "first", "action": rules.CANCEL, "reason": "test over"})
    thread.join(5)


def test_the_go_for_its_token_lets_it_take_over_and_the_record_ends_active(tmp_path):
    home = JobHome(str(tmp_path))
    standby, thread, outcome = standing_by(home, "mine")
    home.write_control(STANDBY_GO, {"token": "someone-else", "action": rules.GO})
    time.sleep(0.3)
    assert thread.is_alive(), "a go for another token is not ours"
    home.write_control(STANDBY_GO, {"token": "mine", "action": rules.GO, "by": "upgrade"})
    thread.join(5)
    assert outcome["go"]["by"] == "upgrade"
    assert home.read_control(STANDBY_RECORD)["state"] == rules.StandbyState.TAKING_OVER
    standby.took_over()
    record = home.read_control(STANDBY_RECORD)
    assert (record["state"], record["pid"], record["host"]) == (rules.StandbyState.ACTIVE, os.getpid(), socket.gethostname())
    assert home.read_control(STANDBY_GO) is None


def test_a_job_that_stops_by_itself_is_not_taken_over_without_a_go(tmp_path):
    home = JobHome(str(tmp_path))
    (tmp_path / "status.json").write_text('{"state": "FAILED", "error": "crashed"}')
    _, thread, outcome = standing_by(home, "mine", max_wait_seconds=1.5)
    time.sleep(0.5)
    assert "does not take over without one" in home.read_control(STANDBY_RECORD)["note"]
    thread.join(5)
    assert "gave up waiting" in outcome["error"] and "go" not in outcome
    assert home.read_control(STANDBY_RECORD)["state"] == rules.StandbyState.ENDED


def test_a_cancel_ends_it(tmp_path):
    home = JobHome(str(tmp_path))
    _, thread, outcome = standing_by(home, "mine")
    home.write_control(STANDBY_GO, {"token": "mine", "action": rules.CANCEL, "by": "upgrade", "reason": "not ready"})
    thread.join(5)
    assert "ended by upgrade: not ready" in outcome["error"]
    assert home.read_control(STANDBY_RECORD)["state"] == rules.StandbyState.ENDED


def test_a_standby_whose_job_code_fails_before_its_warm_up_says_why_in_its_record(tmp_path):
    """Not "the process exited": the upgrade that launched it fails before its stop with the job's own reason."""
    home = JobHome(str(tmp_path))
    standby = Standby(home, "tok", "2", heartbeat_seconds=0.2)
    standby.fail_early("InvalidInputError: a warm standby cannot hold this source; upgrade with --no-standby")
    record = home.read_control(STANDBY_RECORD)
    assert (record["token"], record["state"]) == ("tok", rules.StandbyState.FAILED)
    verdict = rules.judge_ready(record, "tok", process_alive=False, now=datetime.now(UTC))
    assert verdict.outcome == rules.Readiness.FAILED and "upgrade with --no-standby" in verdict.message
    standby.fail_early("a second reason")  # the record already says how it ended
    assert home.read_control(STANDBY_RECORD)["error"].endswith("--no-standby")


def hot_home(tmp_path, state: str) -> JobHome:
    """A job home whose hot standby record waits for its driver, and a job status in ``state`` from another host."""
    home = JobHome(str(tmp_path))
    (tmp_path / "job.json").write_text(json.dumps({"job": "orders", "version": "1"}))
    home.write_control(STANDBY_RECORD, {"token": "hot", "state": rules.StandbyState.LAUNCHED, "version": "1",
                                        "hot": {"policy": {"max_heartbeat_age": 5.0}}})
    write_status(tmp_path, state)
    return home


def write_status(tmp_path, state: str) -> None:
    now = datetime.now(UTC)
    (tmp_path / "status.json").write_text(json.dumps({
        "job": "orders", "state": state, "pid": 1, "host": "elsewhere", "heartbeat_interval_seconds": 1,
        "heartbeat_epoch": now.timestamp() - 0.5, "started_at": now.isoformat()}))


def test_a_hot_standby_takes_over_a_failed_job_by_itself_and_records_the_failover(tmp_path):
    home = hot_home(tmp_path, "RUNNING")
    standby, thread, outcome = standing_by(home, "hot")
    write_status(tmp_path, "FAILED")
    thread.join(10)
    assert outcome["go"]["by"] == "failover", outcome
    standby.took_over()
    failover = home.history()[-1]
    assert (failover["operation"], failover["args"]["dead_pid"], failover["args"]["restarter"]) == (
        "failover", 1, "failover"), failover
    assert 0 < failover["after"]["without_driver_seconds"] < 3, failover


def test_a_hot_standby_stands_down_when_the_job_is_stopped_and_waits_while_it_runs(tmp_path):
    home = hot_home(tmp_path, "RUNNING")
    _standby, thread, outcome = standing_by(home, "hot")
    time.sleep(1.0)
    assert thread.is_alive() and "go" not in outcome, "a running job is not taken over"
    home.request_stop("an operator")
    thread.join(10)
    assert "stood down" in outcome["error"] and "stop requested" in outcome["error"], outcome
    record = home.read_control(STANDBY_RECORD)
    assert record["state"] == rules.StandbyState.ENDED and "stopped on purpose" in record["error"], record
    assert all(r["operation"] != "failover" for r in home.history())
