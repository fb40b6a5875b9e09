"""How the operators wait: in their slot for ``defer_after_seconds``, then deferred with the time left.

The trigger is the real StreamJobStateTrigger reading a real job home's status.json, which a thread writes
the way a driver does (STOPPED after a drain); the operator is a real BaseOperator whose ``defer`` raises
Airflow's TaskDeferred.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import TaskDeferred

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.operators.waiting import DEFAULT_DEFER_AFTER_SECONDS, defer_after, wait_then_defer
from airflow_kafka_stream.storage.status import write_status
from airflow_kafka_stream.triggers.job_state import StreamJobStateTrigger


class Waiting(BaseOperator):
    def __init__(self, deferrable: bool, **kwargs: Any) -> None:
        super().__init__(task_id="wait", **kwargs)
        self.deferrable = deferrable

    def done(self, context: Any, event: dict[str, Any], phase: str) -> tuple[str, dict[str, Any]]:
        return phase, event


def beat(home: str, state: str) -> None:
    now = datetime.now(UTC)
    write_status(home, {"state": state, "heartbeat": now.isoformat(), "heartbeat_epoch": now.timestamp(),
                        "started_at": now.isoformat(), "heartbeat_interval_seconds": 1})


def stop_after(home: str, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, beat, (home, "STOPPED"))
    timer.start()
    return timer


def trigger(home: str, timeout: float = 60.0) -> StreamJobStateTrigger:
    return StreamJobStateTrigger(job_home=home, target_states=["STOPPED"], poll_seconds=0.1, timeout_seconds=timeout)


def test_a_wait_that_ends_within_the_grace_ends_in_the_slot_without_deferring(tmp_path):
    home = str(tmp_path)
    beat(home, "DRAINING")
    stop_after(home, 0.5)
    phase, event = wait_then_defer(Waiting(deferrable=True), {}, trigger(home), "done", {"phase": "drain"}, 10.0)
    assert (phase, event["status"], event["job"]["state"]) == ("drain", "success", "STOPPED")


def test_a_wait_still_going_after_the_grace_defers_with_the_time_that_is_left(tmp_path):
    home = str(tmp_path)
    beat(home, "DRAINING")
    started = time.monotonic()
    with pytest.raises(TaskDeferred) as deferred:
        wait_then_defer(Waiting(deferrable=True), {}, trigger(home, timeout=60.0), "done", {"phase": "drain"}, 1.0)
    assert time.monotonic() - started < 5
    assert deferred.value.method_name == "done" and deferred.value.kwargs == {"phase": "drain"}
    # The trigger the triggerer gets waits only for what is left of the operator's timeout.
    assert 58.0 <= deferred.value.trigger.timeout_seconds < 60.0


def test_zero_seconds_defers_after_one_look(tmp_path):
    home = str(tmp_path)
    beat(home, "DRAINING")
    with pytest.raises(TaskDeferred):
        wait_then_defer(Waiting(deferrable=True), {}, trigger(home), "done", {"phase": "drain"}, 0.0)
    beat(home, "STOPPED")  # one look that sees the end ends the wait even with no grace at all
    phase, event = wait_then_defer(Waiting(deferrable=True), {}, trigger(home), "done", {"phase": "drain"}, 0.0)
    assert event["status"] == "success"


def test_an_operator_that_does_not_defer_waits_its_whole_timeout_and_reports_it(tmp_path):
    home = str(tmp_path)
    beat(home, "DRAINING")
    started = time.monotonic()
    _phase, event = wait_then_defer(Waiting(deferrable=False), {}, trigger(home, timeout=1.5), "done",
                                    {"phase": "drain"}, 0.0)
    assert 1.0 <= time.monotonic() - started < 5
    assert event["status"] == "timeout" and "gave up after 2s" in event["message"]
    assert event["last_look"] and event["job"]["state"] == "DRAINING"


def test_a_failed_job_ends_the_wait_at_once(tmp_path):
    home = str(tmp_path)
    now = datetime.now(UTC)
    write_status(home, {"state": "FAILED", "error": "query died", "heartbeat_epoch": now.timestamp(),
                        "started_at": now.isoformat()})
    _phase, event = wait_then_defer(Waiting(deferrable=True), {}, trigger(home), "done", {"phase": "drain"}, 10.0)
    assert event["status"] == "failed" and "query died" in event["message"]


@pytest.mark.parametrize(("given", "configured", "expected"), [
    (None, None, DEFAULT_DEFER_AFTER_SECONDS),  # neither: the default
    (None, "5", 5.0),                           # airflow.cfg's [airflow_kafka_stream] defer_after_seconds
    (0, "5", 0.0),                              # the operator's own setting wins, 0 included
    ("12.5", None, 12.5),                       # a rendered template is a string
])
def test_defer_after_takes_the_operator_then_the_configuration(monkeypatch, given, configured, expected):
    if configured is not None:
        monkeypatch.setenv("AIRFLOW__AIRFLOW_KAFKA_STREAM__DEFER_AFTER_SECONDS", configured)
    assert defer_after(given) == expected


@pytest.mark.parametrize("bad", [-1, "soon", float("nan")])
def test_defer_after_refuses_what_is_not_seconds_and_names_the_setting(bad):
    with pytest.raises(InvalidInputError, match="defer_after_seconds"):
        defer_after(bad)
