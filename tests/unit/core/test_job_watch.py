"""core.job_watch: one status read and the clock decide whether a waiting task is done, as a table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.job_watch import WaitStatus, WatchSpec, judge, summary
from airflow_kafka_stream.core.status_document import StatusDocument

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
SUBMITTED = NOW - timedelta(minutes=2)


def status(state: str, beat_age: float = 1.0, batches: int = 0, started: datetime = NOW - timedelta(minutes=1),
           **more) -> dict:
    return {"state": state, "heartbeat_epoch": (NOW - timedelta(seconds=beat_age)).timestamp(),
            "heartbeat_interval_seconds": 5.0, "batches_this_run": batches, "last_batch_id": 7,
            "started_at": started.isoformat(), **more}


RUNNING_1 = WatchSpec.of(["RUNNING"], min_batches=1, newer_than=SUBMITTED)
STOPPED = WatchSpec.of(["STOPPED"])

CASES = [
    # id, status, spec, outcome, words in the message, why
    ("no-status", None, RUNNING_1, WaitStatus.WAITING, "not reported", "the driver has not written anything yet"),
    ("earlier-run", status("STOPPED", started=SUBMITTED - timedelta(hours=1)), RUNNING_1, WaitStatus.WAITING,
     "earlier run", "a status from before the submit belongs to the previous run, whatever it says"),
    ("starting", status("STARTING"), RUNNING_1, WaitStatus.WAITING, "STARTING", "starting is progress, not an end"),
    ("running-no-batch", status("RUNNING", batches=0), RUNNING_1, WaitStatus.WAITING, "0 batch",
     "running but nothing committed yet: a job that looks alive while consuming nothing is not healthy"),
    ("running-enough", status("RUNNING", batches=1), RUNNING_1, WaitStatus.SUCCESS, "committed 1 batch",
     "RUNNING with the required batches ends the wait"),
    ("failed", status("FAILED", error="boom"), RUNNING_1, WaitStatus.FAILED, "boom",
     "a failed job fails the wait with its error"),
    ("stopped-while-waiting-running", status("STOPPED"), RUNNING_1, WaitStatus.FAILED, "STOPPED",
     "a job that ended cannot become RUNNING by itself"),
    ("dead-driver", status("RUNNING", beat_age=300, batches=3), RUNNING_1, WaitStatus.FAILED, "died",
     "an active state with a stale heartbeat is a dead driver, even with batches"),
    ("slow-beat-not-dead", status("DRAINING", beat_age=25, heartbeat_interval_seconds=10), STOPPED,
     WaitStatus.WAITING, "DRAINING", "25 s is under 4 intervals of a 10 s heartbeat"),
    ("stopped", status("STOPPED", beat_age=900), STOPPED, WaitStatus.SUCCESS, "STOPPED",
     "a final state needs no fresh heartbeat"),
    ("failed-while-stopping", status("FAILED", error="x"), STOPPED, WaitStatus.FAILED, "FAILED",
     "waiting for STOPPED, a FAILED job is a failure"),
    ("failed-is-target", status("FAILED", error="x"), WatchSpec.of(["STOPPED", "FAILED"]), WaitStatus.SUCCESS,
     "FAILED", "a caller that accepts FAILED (a watchdog) gets success"),
    ("skewed-clock-not-dead", status("RUNNING", beat_age=38, batches=1, clock_skew_seconds=10), RUNNING_1,
     WaitStatus.SUCCESS, "committed 1 batch", "38 s on the reader's clock is within 30 s plus the 10 s the job "
     "declared its driver's clock may lag (another host)"),
    ("skewed-clock-still-dead", status("RUNNING", beat_age=41, batches=1, clock_skew_seconds=10), RUNNING_1,
     WaitStatus.FAILED, "died", "past the limit plus the declared skew the driver is gone"),
    ("skewed-start-is-this-run", status("RUNNING", batches=1, started=SUBMITTED - timedelta(seconds=4),
                                        clock_skew_seconds=5), RUNNING_1, WaitStatus.SUCCESS, "committed",
     "a driver whose clock runs 4 s behind the submitter's started 'before' the submit, within the skew"),
    ("undeclared-skew-is-none", status("RUNNING", batches=1, started=SUBMITTED - timedelta(seconds=4)), RUNNING_1,
     WaitStatus.WAITING, "earlier run", "without a declared skew, clocks are compared as on one host"),
    ("future-heartbeat-is-fresh", status("RUNNING", beat_age=-20, batches=1), RUNNING_1, WaitStatus.SUCCESS,
     "committed", "a driver whose clock runs ahead writes heartbeats from the future: fresh, not an error"),
]


@pytest.mark.parametrize(("case", "doc", "spec", "outcome", "words", "why"), CASES, ids=[c[0] for c in CASES])
def test_judge(case, doc, spec, outcome, words, why):
    verdict = judge(StatusDocument.parse(doc), spec, NOW)
    assert verdict.outcome is outcome, why
    assert words in verdict.message, verdict.message


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"target_states": []}, "target_states"),
    ({"target_states": ["RUNING"]}, "target_states"),
    ({"target_states": ["RUNNING"], "min_batches": -1}, "min_batches"),
    ({"target_states": ["RUNNING"], "newer_than": datetime(2026, 1, 1)}, "newer_than"),
    ({"target_states": ["RUNNING"], "max_heartbeat_age": 0}, "max_heartbeat_age"),
])
def test_spec_refuses_bad_arguments_naming_them(kwargs, named):
    with pytest.raises(ValueError, match=named):
        WatchSpec.of(**kwargs)


def test_summary_holds_what_a_person_checks():
    doc = status("RUNNING", beat_age=2.04, batches=3, application_id="local-1", generation=2,
                 last_offsets={"t": {"0": 5}})
    assert summary(StatusDocument.parse(doc), NOW) == {
        "state": "RUNNING", "recorded_state": "RUNNING", "state_reason": "the job is RUNNING",
        "application_id": "local-1", "generation": 2, "last_batch_id": 7,
        "last_offsets": {"t": {"0": 5}}, "batches_this_run": 3, "heartbeat_age_seconds": 2.0,
        "started_at": doc["started_at"], "error": None}
    assert summary(None, NOW) == {"state": None}


def test_summary_shows_a_driver_gone_as_dead_and_a_give_up_as_such():
    doc = StatusDocument.parse(status("RUNNING", beat_age=1.0, batches=3))
    dead = summary(doc, NOW, processes_gone=True)
    assert (dead["state"], dead["recorded_state"]) == ("DEAD", "RUNNING"), "a kill -9 right now: not RUNNING"
    gave_up = summary(doc, NOW, processes_gone=True, gave_up="restarted 3 time(s) in the last 600s")
    assert gave_up["state"] == "GAVE_UP" and "restarted 3 time(s)" in gave_up["state_reason"], gave_up
