"""Burrow's window rules (core.lag_window): a numbered table, each case saying why it expects its status."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.lag_window import (
    MAX_LOOKS,
    Clock,
    Look,
    RecordedMove,
    WindowStatus,
    bound,
    evaluate_window,
    resets_of,
)
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.verify import PartitionObservation, evaluate
from airflow_kafka_stream.render.checkpoint import verify_text

TP = TopicPartition("orders", 0)
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=10)


def looks(*points: tuple[int, int | None, int | None], live: bool = True, step: float = 60.0) -> list[Look]:
    """Looks ``step`` seconds apart, the last at NOW, each (group offset, high watermark)."""
    count = len(points)
    return [Look(NOW - timedelta(seconds=step * (count - 1 - i)), {TP: (group, high)}, live)
            for i, (group, high) in enumerate(points)]


def at(minutes_ago: float) -> datetime:
    return NOW - timedelta(minutes=minutes_ago)


# (id, looks, recorded resets, expected status, expected rule, reason)
CASES = [
    ("01-ok-steady", looks((100, 100), (110, 110), (120, 120)), (), WindowStatus.OK, None,
     "caught up at every look"),
    ("02-one-look", looks((100, 150)), (), WindowStatus.OK, None, "one look judges nothing over time"),
    ("03-rewind", looks((100, 100), (100, 100), (40, 100)), (), WindowStatus.REWIND, "rewound",
     "the group moved back from 100 to 40 with no reset recorded"),
    ("04-rewind-came-back", looks((100, 100), (40, 100), (100, 100)), (), WindowStatus.OK, None,
     "moved back and forward again to where it was: not a rewind"),
    ("04b-came-back-then-a-recorded-reset", looks((100, 100), (40, 100), (100, 100), (0, 100)),
     ((at(0.5), at(0.4)),), WindowStatus.OK, None,
     "the first move came back; the second is a recorded reset: neither is a rewind now"),
    ("04c-came-back-then-moved-back-again", looks((100, 100), (40, 100), (100, 100), (30, 100)), (),
     WindowStatus.REWIND, "rewound", "the second move back is judged on its own: nothing explains it"),
    ("05-rewind-partly-back", looks((100, 100), (40, 100), (70, 100)), (), WindowStatus.REWIND, "rewound",
     "moved back, then forward but not to where it was"),
    ("06-reset-recorded", looks((100, 100), (100, 100), (0, 100)), ((at(0.5), at(0.4)),), WindowStatus.OK, None,
     "a reset recorded between the looks explains the move"),
    ("07-reset-before-the-offset-was-committed", looks((50, 100), (100, 100), (0, 100)), ((at(2.5), at(2.4)),),
     WindowStatus.REWIND, "rewound",
     "the reset ran before a look still saw 50, so before the group committed 100: it does not explain 100 -> 0"),
    ("08-restore-while-stopped", looks((100, 100), (100, 100), (100, 100), (60, 100)), ((at(2.5), at(2.4)),),
     WindowStatus.OK, None,
     "a restore while the offset stood, seen moving back only when the driver started: explained"),
    ("09-reset-after-the-move", looks((100, 100), (0, 100), (0, 100)), ((at(0.5), at(0.4)),),
     WindowStatus.REWIND, "rewound", "a reset recorded after the look that saw the move does not explain it"),
    ("10-stop", looks((100, 200), (100, 200), (100, 210), step=400), (), WindowStatus.STOP, "stopped",
     "the offset stood for 800s (> the 600s window) while records wait and the job runs"),
    ("11-stop-not-long-enough", looks((100, 200), (100, 210), step=300), (), WindowStatus.OK, None,
     "300s without a commit is within the window"),
    ("12-stop-nothing-waits", looks((200, 200), (200, 200), (200, 200), step=400), (), WindowStatus.OK, None,
     "an idle, caught-up job commits nothing and is fine"),
    ("13-stop-job-stopped", looks((100, 200), (100, 200), (100, 210), live=False, step=400), (),
     WindowStatus.OK, None, "a job stopped on purpose is expected not to commit"),
    ("14-warn", looks((10, 20), (20, 40), (30, 60), (40, 80)), (), WindowStatus.WARN, "falling_behind",
     "three commits, lag 10 -> 20 -> 30 -> 40: it grew at each"),
    ("15-warn-one-commit-caught-up", looks((10, 20), (20, 40), (40, 45), (50, 80)), (), WindowStatus.OK, None,
     "the lag shrank at one commit (20 -> 5)"),
    ("16-warn-too-few-commits", looks((10, 20), (20, 40), (30, 60)), (), WindowStatus.OK, None,
     "two commits are not enough to call a trend"),
    ("17-warn-ignores-looks-without-commit", looks((10, 20), (20, 40), (20, 30), (30, 60), (40, 80)), (),
     WindowStatus.WARN, "falling_behind", "a look without a commit is not a commit of the window"),
    ("18-warn-older-than-the-window", looks((10, 20), (20, 40), (30, 60), (40, 80), (90, 90), step=250), (),
     WindowStatus.OK, None, "the growing commits are older than the window; the last one caught up"),
    ("19-rewind-beats-stop", looks((300, 400), (100, 400), (100, 400), step=400), (), WindowStatus.REWIND,
     "rewound", "a rewind outranks a stop"),
    ("20-stop-since-the-first-look", looks((100, 200), (100, 300), step=700), (), WindowStatus.STOP, "stopped",
     "the offset stood at every look, the first 700s ago: longer than the window"),
    ("22-rewound-past-the-reset-target", looks((100, 100), (100, 100), (83, 100)),
     (RecordedMove(at(0.5), at(0.4), {TP: 90}),), WindowStatus.REWIND, "rewound",
     "reset --shift-by -10 set 90; the group is at 83: the 7 more are no part of the reset (found from outside)"),
    ("23-at-the-reset-target", looks((100, 100), (100, 100), (90, 100)), (RecordedMove(at(0.5), at(0.4), {TP: 90}),),
     WindowStatus.OK, None, "the reset set 90 and the group is there"),
    ("24-above-the-reset-target", looks((100, 100), (100, 100), (95, 100)), (RecordedMove(at(0.5), at(0.4), {TP: 90}),),
     WindowStatus.OK, None, "the job committed forward from the reset's 90 before the look"),
    ("25-rewound-after-a-look-at-the-target", looks((100, 100), (90, 100), (83, 100), step=20),
     (RecordedMove(at(0.5), at(0.4), {TP: 90}),), WindowStatus.REWIND, "rewound",
     "a look saw the reset's 90; the move from 90 to 83 came after, however recent the reset"),
    ("26-reset-of-another-partition", looks((100, 100), (100, 100), (90, 100)),
     (RecordedMove(at(0.5), at(0.4), {TopicPartition("orders", 1): 0}),), WindowStatus.REWIND, "rewound",
     "a reset of partition 1 does not explain a move of partition 0"),
    ("27-restore-to-its-savepoint", looks((100, 100), (100, 100), (100, 100), (64, 100)),
     (RecordedMove(at(2.5), at(2.4), {TP: 60}),), WindowStatus.OK, None,
     "the restored savepoint was at 60, the driver committed 64 from there"),
    ("21-no-group-offset", looks((None, 100), (None, 200)), (), WindowStatus.OK, None,
     "a partition the group never committed has no track"),
]


@pytest.mark.parametrize(("seen", "resets", "expected", "rule", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_window_status(seen, resets, expected, rule, reason):
    moves = tuple(move if isinstance(move, RecordedMove) else RecordedMove(*move) for move in resets)
    verdict = evaluate_window(seen, Clock(NOW, WINDOW, moves))
    assert verdict.status is expected, f"{reason}: got {verdict.status} {verdict.to_dict()}"
    assert verdict.rule == rule, reason
    assert verdict.looks == len(seen)


def test_the_numbers_of_each_rule():
    rewind = evaluate_window(looks((100, 100), (40, 100)), Clock(NOW, WINDOW)).findings[0]
    assert (rewind.numbers["from_offset"], rewind.numbers["to_offset"], rewind.numbers["records"]) == (100, 40, 60)
    stop = evaluate_window(looks((100, 200), (100, 200), (100, 210), step=400), Clock(NOW, WINDOW)).findings[0]
    assert (stop.numbers["lag"], stop.numbers["idle_seconds"], stop.numbers["window_seconds"]) == (110, 800, 600)
    warn = evaluate_window(looks((10, 20), (20, 40), (30, 60), (40, 80)), Clock(NOW, WINDOW)).findings[0]
    assert (warn.numbers["commits"], warn.numbers["lag_from"], warn.numbers["lag_to"]) == (3, 10, 40)
    assert warn.to_dict()["topic"] == "orders" and warn.to_dict()["rule"] == "falling_behind"


def test_the_worst_partition_leads():
    other = TopicPartition("orders", 1)
    seen = [Look(at(3), {TP: (10, 20), other: (100, 100)}, True), Look(at(2), {TP: (20, 40), other: (100, 100)}, True),
            Look(at(1), {TP: (30, 60), other: (50, 100)}, True), Look(NOW, {TP: (40, 80), other: (50, 100)}, True)]
    verdict = evaluate_window(seen, Clock(NOW, WINDOW))
    assert [(f.partition.partition, f.status) for f in verdict.findings] == [(1, WindowStatus.REWIND),
                                                                             (0, WindowStatus.WARN)]
    assert verdict.status is WindowStatus.REWIND and verdict.rule == "rewound"


@pytest.mark.parametrize(("status", "problem"), [(WindowStatus.REWIND, True), (WindowStatus.STOP, True),
                                                 (WindowStatus.WARN, False), (WindowStatus.OK, False)],
                         ids=["1-rewind-fails", "2-stop-fails", "3-warn-warns", "4-ok"])
def test_verify_exit_code_with_the_window(status, problem):
    seen = {WindowStatus.REWIND: looks((100, 100), (40, 100)),
            WindowStatus.STOP: looks((100, 200), (100, 200), (100, 210), step=400),
            WindowStatus.WARN: looks((10, 20), (20, 40), (30, 60), (40, 80)),
            WindowStatus.OK: looks((100, 100))}[status]
    result = replace(evaluate([PartitionObservation(TP, 100, 100, 0, 100)], now=NOW),
                     window=evaluate_window(seen, Clock(NOW, WINDOW)))
    assert result.window.status is status
    assert result.exit_code == (1 if problem else 0)
    assert result.status.value == "OK", "the per-partition status is unchanged by the window"
    assert result.to_dict()["window"]["status"] == status.value
    text = verify_text(result)
    assert f"window: {status.value}" in text
    assert ("a warning, not a failure" in text) is (status is WindowStatus.WARN)


def test_without_a_window_the_report_is_as_before():
    result = evaluate([PartitionObservation(TP, 100, 100, 0, 100)], now=NOW)
    assert "window" not in result.to_dict() and "window:" not in verify_text(result)


def test_looks_round_trip_and_bad_ones_are_left_out():
    look = Look(NOW, {TP: (5, 9), TopicPartition("b", 3): (None, 4)}, True)
    assert Look.parse(json.loads(json.dumps(look.to_dict()))) == look
    for bad in (None, [], {"at": "yesterday", "partitions": {}}, {"at": NOW.isoformat()},
                {"at": NOW.isoformat(), "partitions": {"t": {"x": [1, 2]}}}):
        assert Look.parse(bad) is None, bad


def test_the_window_is_bounded():
    many = [Look(NOW - timedelta(seconds=i), {TP: (i, i)}) for i in range(MAX_LOOKS + 20)]
    kept = bound(many, NOW, WINDOW)
    assert len(kept) == MAX_LOOKS and kept[-1].at == NOW and kept == sorted(kept, key=lambda look: look.at)
    old = [Look(at(25), {TP: (1, 1)}), Look(at(19), {TP: (2, 2)}), Look(NOW, {TP: (3, 3)})]
    assert [look.at for look in bound(old, NOW, WINDOW)] == [at(19), NOW], "two windows back, no further"


def test_resets_are_read_from_the_history():
    records = [
        {"operation": "reset", "result": "ok", "started_at": at(3).isoformat(), "finished_at": at(2).isoformat(),
         "after": {"targets": {"orders": {"0": 90, "1": 7}}}},
        {"operation": "restore", "result": "failed", "started_at": at(1).isoformat(), "after": None},
        {"operation": "restore", "result": "ok", "started_at": at(1).isoformat(),
         "after": {"savepoint": {"offsets": {"orders": {"0": 60}}}}},
        {"operation": "reset", "result": "refused", "started_at": at(1).isoformat()},
        {"operation": "stop", "result": "ok", "started_at": at(1).isoformat()},
        {"operation": "reset", "result": "ok", "started_at": "not a time"},
    ]
    assert resets_of(records) == (
        RecordedMove(at(3), at(2), {TP: 90, TopicPartition("orders", 1): 7}),
        RecordedMove(at(1), at(1), None),
        RecordedMove(at(1), at(1), {TP: 60}))


def test_a_rewind_past_a_reset_says_what_the_reset_set():
    found = evaluate_window(looks((100, 100), (100, 100), (83, 100)),
                            Clock(NOW, WINDOW, (RecordedMove(at(0.5), at(0.4), {TP: 90}),))).findings[0]
    assert "the reset or restore recorded meanwhile set it to 90, not lower" in found.detail, found.detail
