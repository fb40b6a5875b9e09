"""The stop's phased machine (``ops.stop``): what each finished wait concludes, as a table, on a real job home.

A wait ends ``success`` (the job reported a final state), ``timeout`` or ``failed`` (the driver died), in the
drain phase or while a kill is awaited. The conclusion is a result, the next phase, or an error that says
what runs now; each leaves the control files and the history as the module docstring says.
"""

from __future__ import annotations

import json
import time

import pytest

from airflow_kafka_stream.errors import JobStateError, OperationIncompleteError
from airflow_kafka_stream.ops import stop
from airflow_kafka_stream.ops.results import StopResult
from airflow_kafka_stream.ops.stop import (
    StopOptions,
    StopPhase,
    conclude,
    request_kill,
    request_stop,
)
from airflow_kafka_stream.storage.jobhome import STOP_MODE_KILL, JobHome

DRAIN, KILL = StopPhase.DRAIN, StopPhase.KILL


def _home(tmp_path, state: str) -> JobHome:
    (tmp_path / "checkpoints").mkdir(exist_ok=True)
    home = JobHome(str(tmp_path))
    _report(tmp_path, "RUNNING")
    request_stop(home, by="test")  # the stop was asked of a running job
    _report(tmp_path, state)
    return home


def _report(where, state: str) -> None:
    """What the driver writes: its state, a fresh heartbeat and its last batch."""
    status = {"state": state, "heartbeat_epoch": time.time(), "heartbeat_interval_seconds": 5, "pid": 4242,
              "host": "localhost", "last_batch_id": 9, "last_offsets": None}
    if state == "FAILED":
        status["error"] = "the sink refused a record"
    (where / "status.json").write_text(json.dumps(status))


def _operations(home: JobHome) -> list[str]:
    return [record.get("operation") for record in home.history()]


@pytest.mark.parametrize(
    ("event", "phase", "on_timeout", "state", "expected"),
    [
        pytest.param("success", DRAIN, "withdraw", "STOPPED", "stopped", id="drained"),
        pytest.param("success", KILL, "kill", "STOPPED", "killed", id="killed-and-answered"),
        pytest.param("timeout", DRAIN, "kill", "DRAINING", KILL, id="drain-timed-out-so-kill"),
        pytest.param("timeout", DRAIN, "withdraw", "RUNNING", "withdrawn", id="drain-timed-out-so-withdraw"),
        pytest.param("timeout", DRAIN, "withdraw", "STOPPED", "stopped", id="stopped-as-it-was-withdrawn"),
        pytest.param("timeout", KILL, "kill", "DRAINING", "kill-unanswered", id="kill-unanswered"),
        pytest.param("failed", DRAIN, "withdraw", "DRAINING", "died", id="driver-died-draining"),
        pytest.param("success", DRAIN, "withdraw", "FAILED", "failed-stopping", id="failed-while-stopping"),
    ],
)
def test_what_a_finished_wait_concludes(tmp_path, event, phase, on_timeout, state, expected):
    home = _home(tmp_path, state)
    if phase is KILL:
        request_kill(home, by="test")  # the drain timed out before: the kill was asked
    options = StopOptions(timeout=30, on_timeout=on_timeout, kill_timeout=10)
    errors = {
        "withdrawn": (JobStateError, "the stop request was withdrawn and the job keeps running (it reports "
                                     "RUNNING again"),
        "kill-unanswered": (OperationIncompleteError, "did not answer the kill request within 10s"),
        "died": (OperationIncompleteError, "did not report a stop"),
        "failed-stopping": (OperationIncompleteError, "failed while stopping: the sink refused a record"),
    }

    def decide():
        return conclude(home, {"status": event, "message": "its driver is gone"}, phase, options, by="test",
                        poll=0.01)

    if expected in errors:
        error, says = errors[expected]
        with pytest.raises(error) as raised:
            decide()
        assert says.lower() in str(raised.value).lower()
    else:
        concluded = decide()
        if expected is KILL:
            assert concluded is KILL
        else:
            assert isinstance(concluded, StopResult)
            assert (concluded.state, concluded.killed, concluded.batch_id) == ("STOPPED", expected == "killed", 9)
    request = home.stop_request()
    # A withdrawn stop leaves no request behind; a kill turns it into a kill; otherwise it stays for the next
    # start to clear.
    if expected == "withdrawn" or (event == "timeout" and on_timeout == "withdraw"):
        assert request is None
    elif expected is KILL or phase is KILL:
        assert request is not None and request.get("mode") == STOP_MODE_KILL
    else:
        assert request is not None
    history = _operations(home)
    assert history[0] == "stop-request"
    assert ("stop-withdraw" in history) == (event == "timeout" and on_timeout == "withdraw")
    assert ("stop-kill" in history) == (expected is KILL or phase is KILL)
    assert ("stop" in history) == (expected in ("stopped", "killed", "failed-stopping"))


def test_a_withdrawn_stop_waits_a_bounded_time_for_the_job_to_run_again(tmp_path, monkeypatch):
    """Still DRAINING after the withdrawal: the error says it returns to RUNNING when it next looks."""
    monkeypatch.setattr(stop, "ACKNOWLEDGE_SECONDS", 1.0)
    home = _home(tmp_path, "DRAINING")
    started = time.monotonic()
    with pytest.raises(JobStateError, match="returns to RUNNING when it next looks"):
        conclude(home, {"status": "timeout"}, DRAIN, StopOptions(timeout=30), poll=0.1)
    assert 1.0 <= time.monotonic() - started < 5.0
