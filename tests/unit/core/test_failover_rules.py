"""A hot standby's rules (``core.failover``): when it takes a job over, stands down or waits, and when the keeper
launches the next one. Pure: statuses as the driver writes them, no job home."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.failover import RelaunchPolicy, Verdict, judge_failover, relaunch_due
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.watchdog import Policy, Restart

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def status(state: str, beat_age: float = 1.0) -> StatusDocument:
    return StatusDocument.parse({"job": "orders", "state": state, "pid": 10, "host": "h", "heartbeat_interval_seconds": 3,
                                 "heartbeat_epoch": (NOW - timedelta(seconds=beat_age)).timestamp()})


def judge(doc, *, stop=False, restarts=(), gone=None):
    return judge_failover(doc, stop_requested=stop, restarts=list(restarts), now=NOW, policy=Policy(),
                          processes_gone=gone)


@pytest.mark.parametrize("case, doc, kwargs, verdict, words", [
    ("alive", status("RUNNING"), {}, Verdict.WAIT, "RUNNING"),
    ("never reported", None, {}, Verdict.WAIT, "never reported"),
    ("killed on this host", status("RUNNING"), {"gone": True}, Verdict.TAKE_OVER, "no longer exist"),
    ("frozen: heartbeat stale", status("RUNNING", beat_age=31), {"gone": False}, Verdict.TAKE_OVER, "no heartbeat"),
    ("failed and said so", status("FAILED"), {}, Verdict.TAKE_OVER, "FAILED"),
    ("stopped on purpose", status("STOPPED"), {}, Verdict.STAND_DOWN, "stopped on purpose"),
    ("a stop requested, then killed", status("DRAINING"), {"stop": True, "gone": True}, Verdict.STAND_DOWN,
     "stop requested"),
    ("in the backoff", status("RUNNING"), {"gone": True, "restarts": [Restart(NOW - timedelta(seconds=5), "failover")]},
     Verdict.WAIT, "next restart after 30s"),
    ("the budget spent", status("RUNNING"), {"gone": True, "restarts": [Restart(NOW - timedelta(seconds=s), "watchdog")
                                                                         for s in (100, 200, 300)]},
     Verdict.STAND_DOWN, "gave up"),
])
def test_judge_failover(case, doc, kwargs, verdict, words):
    found = judge(doc, **kwargs)
    assert found.verdict is verdict, (case, found)
    assert words in found.reason, (case, found.reason)


def test_a_slow_beating_job_is_judged_by_its_own_intervals():
    slow = StatusDocument.parse({"state": "RUNNING", "heartbeat_interval_seconds": 20,
                                 "heartbeat_epoch": (NOW - timedelta(seconds=60)).timestamp()})
    assert judge(slow).verdict is Verdict.WAIT, "four of its 20 s intervals have not passed"


@pytest.mark.parametrize("ago, verdict, words", [
    ([], True, "no hot standby is live"),
    ([10], False, "next launch after 30s"),
    ([40], True, "1 launched recently"),
    ([40, 70], False, "next launch after 60s"),
    ([100, 400, 700, 1000, 1300], False, "did not last"),
    ([4000], True, "no hot standby is live"),
])
def test_relaunch_due(ago, verdict, words):
    found = relaunch_due([NOW - timedelta(seconds=s) for s in ago], NOW, RelaunchPolicy())
    assert found.due is verdict and words in found.reason, found
