"""core.submit_rules: a retried submit never starts a second driver, as a table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.submit_rules import SubmitAction, decide_submit

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def status(state: str, beat_age: float = 1.0, started: datetime = NOW - timedelta(minutes=5)
           ) -> StatusDocument | None:
    return StatusDocument.parse({"state": state, "heartbeat_epoch": (NOW - timedelta(seconds=beat_age)).timestamp(),
                                 "pid": 42, "started_at": started.isoformat()})


def launched(ago: float, version: str = "1") -> dict:
    return {"pid": 7, "host": "h", "launched_at": (NOW - timedelta(seconds=ago)).isoformat(), "app_version": version}


CASES = [
    # id, status, running version, launch record, launcher alive, expected, why
    ("fresh-home", None, None, None, None, SubmitAction.LAUNCH, "nothing ever ran"),
    ("same-version-runs", status("RUNNING"), "1", None, None, SubmitAction.WAIT,
     "a retry of a submit that worked waits for the running driver"),
    ("other-version-runs", status("RUNNING"), "2", None, None, SubmitAction.REFUSE,
     "two versions on one checkpoint corrupt it"),
    ("stale-heartbeat", status("RUNNING", beat_age=600), "1", None, None, SubmitAction.LAUNCH,
     "a dead driver is replaced"),
    ("stopped", status("STOPPED"), "1", None, None, SubmitAction.LAUNCH, "a stopped job is started again"),
    ("launched-not-reported", status("STOPPED"), "1", launched(20), True, SubmitAction.WAIT,
     "a JVM takes seconds to start: a retry in that window must not launch a second driver"),
    ("launched-other-version", None, None, launched(20, "2"), None, SubmitAction.REFUSE,
     "another version is starting"),
    ("launched-process-dead", None, None, launched(20), False, SubmitAction.LAUNCH,
     "the launched process is gone: launch again"),
    ("launched-long-ago", None, None, launched(900), True, SubmitAction.LAUNCH,
     "past the start grace a silent launch counts as failed"),
    ("launched-and-reported-stopped", status("STOPPED", started=NOW - timedelta(seconds=10)), "1", launched(20),
     True, SubmitAction.LAUNCH, "the launched driver reported and has stopped since: start anew"),
]


@pytest.mark.parametrize(("case", "doc", "running", "record", "alive", "expected", "why"), CASES,
                         ids=[c[0] for c in CASES])
def test_decide_submit(case, doc, running, record, alive, expected, why):
    decision = decide_submit(status=doc, running_version=running, launch_record=record, launcher_alive=alive,
                             version="1", now=NOW)
    assert decision.action is expected, why
