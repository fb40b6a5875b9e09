"""core.health: the health gate's rules, as a table (a job "running" while consuming nothing is unhealthy)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.health import HealthSpec, LagSample, judge_health, run_position, total_lag
from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.status_document import StatusDocument

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SPEC = HealthSpec(min_batches=2, window_seconds=30)


def status(state: str = "RUNNING", batches: int = 3, beat_age: float = 1.0, **more) -> StatusDocument | None:
    return StatusDocument.parse({"state": state, "batches_this_run": batches, "last_batch_id": 9,
                                 "heartbeat_epoch": (NOW - timedelta(seconds=beat_age)).timestamp(),
                                 "started_at": (NOW - timedelta(minutes=1)).isoformat(), **more})


def samples(*points: tuple[float, int, int]) -> list[LagSample]:
    return [LagSample(NOW - timedelta(seconds=30 - at), lag, batches) for at, lag, batches in points]


CASES = [
    # id, status, samples, deadline passed, outcome, words, why
    ("failed", status("FAILED", error="NPE in batch"), [], False, WaitStatus.FAILED, "NPE",
     "a job that fails at start is unhealthy at once"),
    ("dead", status(beat_age=300), [], False, WaitStatus.FAILED, "died", "a silent driver is unhealthy"),
    ("not-yet", status(batches=1), [], False, WaitStatus.WAITING, "1 batch", "one batch of two: wait"),
    ("never-got-going", status(batches=0), [], True, WaitStatus.FAILED, "not healthy in time",
     "running without committing a batch until the deadline is the job that consumes nothing"),
    ("window-open", status(), samples((0, 50, 3), (10, 40, 4)), False, WaitStatus.WAITING, "watching",
     "10 s of a 30 s window: wait"),
    ("healthy", status(), samples((0, 50, 3), (15, 20, 5), (30, 10, 7)), False, WaitStatus.SUCCESS, "healthy",
     "lag shrank while batches were committed"),
    ("slow-batches-sawtooth", status(), samples((0, 5, 3), (4, 45, 3), (8, 85, 3), (9, 6, 4), (13, 46, 4),
                                                (17, 86, 4), (18, 5, 5), (22, 45, 5), (30, 125, 5), (31, 7, 6)),
     False, WaitStatus.SUCCESS, "healthy",
     "batches every 9 s, 10 records/s arriving: the lag climbs between commits and drops at each; sampled "
     "just after a commit and just before the next, it looks like growth, but at each commit it stays flat"),
    ("too-few-commits", status(), samples((0, 5, 3), (15, 60, 3), (30, 120, 4)), False, WaitStatus.WAITING,
     "waiting for 3", "a window with two commits cannot tell a trend from one slow batch: wait for another"),
    ("too-few-commits-at-deadline", status(), samples((0, 5, 3), (15, 60, 3), (30, 20, 4)), True, WaitStatus.SUCCESS,
     "healthy", "at the deadline the commits seen decide: the lag at the second commit is not the growth of "
                "every commit"),
    ("falls-behind-at-every-commit", status(), samples((0, 10, 3), (10, 60, 4), (12, 70, 4), (20, 150, 5),
                                                       (30, 260, 6)), False, WaitStatus.FAILED, "at every one of 4",
     "lag at each commit higher than at the one before: the job loses ground batch after batch"),
    ("one-dip-is-not-falling-behind", status(), samples((0, 10, 3), (10, 60, 4), (20, 30, 5), (30, 90, 6)),
     False, WaitStatus.SUCCESS, "healthy", "a commit that brought the lag down: the job can catch up (Burrow's rule)"),
    ("idle-and-caught-up", status(), samples((0, 0, 3), (30, 0, 3)), False, WaitStatus.SUCCESS, "healthy",
     "nothing to consume and nothing consumed is fine"),
    ("falls-behind", status(), samples((0, 10, 3), (15, 200, 6), (30, 400, 9)), False, WaitStatus.FAILED, "lag grew",
     "committing batches but losing ground is unhealthy"),
    ("consumes-nothing", status(), samples((0, 10, 3), (30, 10, 3)), False, WaitStatus.FAILED, "consumes nothing",
     "records wait and no batch was committed in the window"),
    ("slow-first-batch", status(batches=0), samples((0, 10, 0), (30, 12, 0)), False, WaitStatus.WAITING, "batch",
     "a fresh driver's first batch may take longer than the window (JVM, Python workers, a backlog): within "
     "startup_seconds (300) it is no stall"),
    ("stalled-before-first-batch", status(batches=0), samples((0, 10, 0), (150, 12, 0), (300, 12, 0)), False,
     WaitStatus.FAILED, "consumes nothing", "records waiting and no first batch for startup_seconds: no need to wait "
     "out the deadline"),
    ("stalled-after-a-quiet-first-look", status(batches=0), samples((0, 0, 0), (4, 10, 0), (150, 12, 0),
                                                                    (304, 12, 0)),
     False, WaitStatus.FAILED, "consumes nothing", "a version that took over a drained job is first seen at lag 0; "
     "records waiting from the next look on and no first batch for startup_seconds is the stall (it was found only "
     "at the deadline when the first look alone could start the wait)"),
    ("stalled-after-unknown-looks", status(batches=0), samples((0, None, 0), (4, 10, 0), (304, 10, 0)), False,
     WaitStatus.FAILED, "consumes nothing", "looks whose lag was not known yet cannot start the wait; the first "
     "look with records waiting does"),
    ("first-batch-after-a-quiet-look", status(batches=1), samples((0, 0, 0), (4, 10, 0), (304, 12, 1)), False,
     WaitStatus.WAITING, "1 batch", "a batch committed after the records arrived: no stall, whichever look saw them"),
    ("stalled-after-batches", status(batches=2), samples((0, 10, 2), (30, 12, 2)), False, WaitStatus.FAILED,
     "consumes nothing", "once it committed batches, a whole window without one is a stall; the start-up grace "
     "is over"),
    ("idle-before-first-batch", status(batches=0), samples((0, 0, 0), (30, 0, 0)), False, WaitStatus.SUCCESS,
     "caught up", "no input for a whole window: a healthy job has no batch to commit"),
    ("caught-up-after-the-input-stopped", status(batches=2), samples((0, 40, 1), (5, 0, 2), (20, 0, 2), (36, 0, 2)),
     False, WaitStatus.SUCCESS, "caught up", "it read what arrived and stayed at lag 0 for a whole window: fewer than "
     "three commits cannot be judged for a trend, and need not be (found by the CLI demo: it waited out the "
     "whole deadline)"),
    ("caught-up-for-less-than-a-window", status(batches=2), samples((0, 40, 1), (20, 0, 2), (36, 0, 2)), False,
     WaitStatus.WAITING, "watching", "lag 0 for 16 s of a 30 s window: not yet"),
    ("unknown-lag-is-not-caught-up", status(batches=0), samples((0, None, 0), (15, None, 0), (30, None, 0)), False,
     WaitStatus.WAITING, "batch", "no batch yet and no known start: nothing proves that no input arrived, so a whole "
     "window of looks is no idle job (a drop-state upgrade passed its gate so before its first batch)"),
    ("unknown-lag-at-the-deadline", status(batches=0), samples((0, None, 0), (30, None, 0)), True, WaitStatus.FAILED,
     "not healthy in time", "without a batch or a proof of no input, the deadline ends the gate unhealthy"),
    ("input-since-the-start-before-the-first-batch", status(batches=0), samples((0, 12, 0), (15, 30, 0),
                                                                               (30, 48, 0)),
     False, WaitStatus.WAITING, "batch", "measured from the offsets the run started at, the records that arrived "
     "wait for its slow first batch: neither caught up nor (within startup_seconds) a stall"),
    ("small-growth-tolerated", status(), samples((0, 2, 3), (15, 4, 4), (30, 5, 5)), False, WaitStatus.SUCCESS,
     "healthy",
     "within lag_tolerance=10, jitter of a busy topic is not growth"),
]


@pytest.mark.parametrize(("case", "doc", "taken", "late", "outcome", "words", "why"), CASES,
                         ids=[c[0] for c in CASES])
def test_judge_health(case, doc, taken, late, outcome, words, why):
    spec = HealthSpec(2, 30, lag_tolerance=10) if case == "small-growth-tolerated" else SPEC
    verdict = judge_health(doc, taken, spec, NOW, deadline_passed=late)
    assert verdict.outcome is outcome, why
    assert words in verdict.message, verdict.message


POSITIONS = [
    # id, last_offsets, start offsets, position, why
    ("own-commit", {"t": {"0": 7}}, {"t": {"0": 3}}, {"t": {"0": 7}}, "a run that committed is measured from there"),
    ("seeded-start", None, {"t": {"0": 3, "1": 4}}, {"t": {"0": 3, "1": 4}},
     "no batch yet: it has read nothing past where its generation was seeded"),
    ("empty-commit", {}, {"t": {"0": 3}}, {"t": {"0": 3}}, "an empty document is no commit"),
    ("rule", None, "latest", None, "a rule says where Kafka will start, not where the run did"),
    ("special-value", None, {"t": {"0": -2}}, None, "-2 (earliest) is no offset either"),
    ("unknown", None, None, None, "nothing known: no position, so no lag"),
]


@pytest.mark.parametrize(("case", "last", "start", "expected", "why"), POSITIONS, ids=[c[0] for c in POSITIONS])
def test_run_position(case, last, start, expected, why):
    assert run_position(last, start) == expected, why


def test_total_lag_counts_each_partition_behind_its_high_watermark():
    assert total_lag({"t": {"0": 5, "1": 9}, "u": {"0": 3}}, {("t", 0): 8, ("t", 1): 9, ("u", 0): 1}) == 3


@pytest.mark.parametrize("kwargs", [{"min_batches": 0}, {"window_seconds": -1}, {"lag_tolerance": -2},
                                    {"startup_seconds": -5}])
def test_spec_refuses_bad_values(kwargs):
    with pytest.raises(ValueError):
        HealthSpec(**kwargs)
