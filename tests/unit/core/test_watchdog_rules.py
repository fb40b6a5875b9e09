"""core.watchdog: restart a dead or stuck job, never one stopped on purpose, and give up on a crash loop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.watchdog import Action, Policy, Progress, Restart, decide, track_progress

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
POLICY = Policy(stuck_after_seconds=300, max_restarts=3, window_seconds=3600, backoff_seconds=60)


def status(state: str = "RUNNING", beat_age: float = 2.0, batch: int = 7, **more) -> StatusDocument | None:
    return StatusDocument.parse({"state": state, "last_batch_id": batch,
                                 "heartbeat_epoch": (NOW - timedelta(seconds=beat_age)).timestamp(),
                                 "heartbeat_interval_seconds": 5.0, **more})


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


CASES = [
    # id, status, stop requested, restarts (seconds ago), progress (since seconds ago, batch, lag), lag, action, why
    ("never-started", None, False, [], None, None, Action.NOTHING, "nothing to watch"),
    ("stopped-on-purpose", status("STOPPED"), False, [], None, 5, Action.NOTHING, "a stopped job stays stopped"),
    ("stop-requested-then-failed", status("FAILED", error="x"), True, [], None, 5, Action.NOTHING,
     "a job whose stop was requested is not restarted even if it failed on the way down"),
    ("healthy", status(), False, [], (30, 6, 0), 0, Action.NOTHING, "running and caught up"),
    ("failed", status("FAILED", error="NPE"), False, [], None, 9, Action.RESTART, "a failed job is restarted"),
    ("driver-gone", status(beat_age=120), False, [], None, 9, Action.RESTART, "a silent driver is dead"),
    ("stuck", status(batch=7), False, [], (400, 7, 50), 80, Action.KILL_AND_RESTART,
     "no batch for 400 s while lag grows: the job looks alive and consumes nothing"),
    ("slow-not-stuck", status(batch=7), False, [], (100, 7, 50), 80, Action.NOTHING,
     "100 s is under the 300 s stuck threshold"),
    ("catching-up", status(batch=7), False, [], (400, 7, 90), 80, Action.NOTHING,
     "the lag shrinks: a long batch is making progress"),
    ("idle-no-lag", status(batch=7), False, [], (4000, 7, 0), 0, Action.NOTHING,
     "no input, no batch: idle, not stuck"),
    ("backoff", status("FAILED", error="x"), False, [30], None, 9, Action.WAIT_BACKOFF,
     "restarted 30 s ago, backoff is 60 s"),
    ("backoff-doubles", status("FAILED", error="x"), False, [100, 1000], None, 9, Action.WAIT_BACKOFF,
     "two restarts in the window: the backoff is 120 s"),
    ("backoff-over", status("FAILED", error="x"), False, [130, 1000], None, 9, Action.RESTART,
     "130 s after the second restart, past 120 s"),
    ("crash-loop", status("FAILED", error="poison record"), False, [200, 900, 1500], None, 9, Action.GIVE_UP,
     "three restarts within the hour: a crash loop must not restart forever"),
    ("old-restarts-forgotten", status("FAILED", error="x"), False, [4000, 5000, 6000], None, 9, Action.RESTART,
     "restarts outside the window do not count"),
]


@pytest.mark.parametrize(("case", "doc", "stop", "restarts", "progress", "lag", "action", "why"), CASES,
                         ids=[c[0] for c in CASES])
def test_decide(case, doc, stop, restarts, progress, lag, action, why):
    previous = Progress(ago(progress[0]), progress[1], progress[2]) if progress else None
    decision = decide(doc, stop_requested=stop, restarts=[Restart(ago(s), "watchdog") for s in restarts],
                      previous=previous, lag=lag,
                      now=NOW, policy=POLICY)
    assert decision.action is action, f"{why}: {decision.reason}"


def test_give_up_names_the_last_error():
    decision = decide(status("FAILED", error="cannot parse record 41"), stop_requested=False,
                      restarts=[Restart(ago(s), "watchdog") for s in (10, 20, 30)], previous=None, lag=1, now=NOW,
                      policy=POLICY)
    assert "cannot parse record 41" in decision.reason and "crash loop" in decision.reason


def test_the_watchdog_and_the_supervisor_share_one_budget_and_the_give_up_counts_both():
    # Found from outside: a watchdog restart used the supervisor's budget, and the give-up did not say so.
    restarts = [Restart(ago(30), "supervisor"), Restart(ago(20), "watchdog"), Restart(ago(10), "supervisor")]
    decision = decide(status("FAILED", error="x"), stop_requested=False, restarts=restarts, previous=None, lag=1,
                      now=NOW, policy=POLICY)
    assert decision.action is Action.GIVE_UP
    assert "gave up: 3 restart(s) in the last 3600s (2 by the supervisor, 1 by the watchdog)" in decision.reason, \
        decision.reason
    assert "the limit of 3 the supervisor and the watchdog share" in decision.reason, decision.reason
    older = [Restart(ago(20), None), Restart(ago(10), "watchdog"), Restart(ago(5), "watchdog")]
    found = decide(status("FAILED", error="x"), stop_requested=False, restarts=older, previous=None, lag=1, now=NOW,
                   policy=POLICY)
    assert "(2 by the watchdog, 1 not recorded by whom)" in found.reason, found.reason


def test_progress_keeps_the_time_the_batch_was_first_seen():
    first = track_progress(status(batch=7), None, 10, ago(100))
    assert track_progress(status(batch=7), first, 20, NOW) == first
    assert track_progress(status(batch=8), first, 20, NOW) == Progress(NOW, 8, 20)


LIVENESS_CASES = [
    # id, status, processes gone, starting, action, why
    ("killed-here-fresh-beat", status(beat_age=1), True, None, Action.RESTART,
     "a driver whose processes are gone on this host is dead at once, however fresh its heartbeat"),
    ("elsewhere-fresh-beat", status(beat_age=1), None, None, Action.NOTHING,
     "another host's driver cannot be seen: its fresh heartbeat says it runs"),
    ("elsewhere-stale-beat", status(beat_age=120), None, None, Action.RESTART,
     "another host's driver is judged by its heartbeat age alone"),
    ("processes-alive", status(beat_age=1), False, None, Action.NOTHING, "both processes are there: it runs"),
    ("gone-but-stopped", status("STOPPED", beat_age=1), True, None, Action.NOTHING,
     "a job stopped on purpose is never restarted"),
    ("restart-starting", status("FAILED", error="x"), None, "launched, not reported", Action.NOTHING,
     "a driver launched moments ago is starting, not dead: restarting it again would start a second one"),
    ("gone-in-backoff", status(beat_age=1), True, None, Action.WAIT_BACKOFF,
     "the failure-rate limit and backoff hold for a driver found gone too"),
]


@pytest.mark.parametrize(("case", "doc", "gone", "starting", "action", "why"), LIVENESS_CASES,
                         ids=[c[0] for c in LIVENESS_CASES])
def test_decide_reads_liveness_through_the_one_rule(case, doc, gone, starting, action, why):
    restarts = [Restart(ago(10), "supervisor")] if case == "gone-in-backoff" else []
    decision = decide(doc, stop_requested=False, restarts=restarts, previous=None, lag=None, now=NOW, policy=POLICY,
                      processes_gone=gone, starting=starting)
    assert decision.action is action, f"{why}: {decision.reason}"
