"""Reset planning: every strategy, every scope form, clamping, strict, and refused inputs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core.durations import parse_duration
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.reset_plan import ResetInputs, plan_reset
from airflow_kafka_stream.core.reset_scope import parse_scope
from airflow_kafka_stream.core.reset_strategy import ResetStrategy, StrategyKind, parse_datetime, parse_strategy
from airflow_kafka_stream.errors import OffsetPlanError
from airflow_kafka_stream.render.reset import plan_text

A0, A1, A2 = (TopicPartition("a", i) for i in range(3))
B0, B1 = TopicPartition("b", 0), TopicPartition("b", 1)
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

# a:2 is new (not in the checkpoint); b:1 is empty at 5 (everything before it expired).
INPUTS = ResetInputs(
    partitions_by_topic={"a": 3, "b": 2},
    checkpoint={A0: 50, A1: 20, B0: 10, B1: 5},
    group={A0: 50, A1: 15, B0: None, B1: 5},
    watermarks={A0: (10, 100), A1: (0, 30), A2: (0, 8), B0: (0, 10), B1: (5, 5)},
    timestamp_offsets={A0: 60, A1: 25, A2: 3, B0: 10, B1: 5},
)


def line(a0, a1, a2, b0, b1):
    values = {A0: a0, A1: a1, A2: a2, B0: b0, B1: b1}
    return {tp: v for tp, v in values.items() if v is not None}


# (id, strategy, scope, expected full checkpoint line, why)
STRATEGIES = [
    ("01-to-current", ResetStrategy.to_current(), None, line(50, 20, 0, 10, 5),
     "checkpoint position; the new partition starts at its low watermark"),
    ("02-to-earliest", ResetStrategy.to_earliest(), None, line(10, 0, 0, 0, 5), "low watermarks"),
    ("03-to-latest", ResetStrategy.to_latest(), None, line(100, 30, 8, 10, 5), "high watermarks"),
    ("04-to-offset", ResetStrategy.to_offset(25), None, line(25, 25, 8, 10, 5),
     "25 where it fits, clamped to high elsewhere"),
    ("05-to-offset-below", ResetStrategy.to_offset(2), None, line(10, 2, 2, 2, 5), "clamped up to low"),
    ("06-shift-back", ResetStrategy.shift_by(-15), None, line(35, 5, 0, 0, 5), "from checkpoint, clamped at low"),
    ("07-shift-forward", ResetStrategy.shift_by(5), None, line(55, 25, 5, 10, 5),
     "new partition shifts from its low watermark"),
    ("08-to-datetime", ResetStrategy.to_datetime(NOW), None, line(60, 25, 3, 10, 5), "looked-up offsets"),
    ("09-by-duration", ResetStrategy.by_duration("PT1H", NOW), None, line(60, 25, 3, 10, 5), "looked-up offsets"),
    ("10-from-file", ResetStrategy.from_file("a,1,3\nb,0,4\n"), None, line(50, 3, None, 4, 5),
     "only listed partitions change; new a:2 stays out of the line"),
    ("11-to-recorded", ResetStrategy.to_recorded({A0: 70, A2: 1}, "savepoint sp1"), None, line(70, 20, 1, 10, 5),
     "a savepoint's offsets; a:2 joins the line"),
    ("12-to-offset-map", parse_strategy("to-offset", '{"b":{"0":7}}'), None, line(50, 20, None, 7, 5),
     "per-partition to-offset"),
    ("13-scope-topic", ResetStrategy.to_earliest(), "a", line(10, 0, 0, 10, 5), "only topic a moves"),
    ("14-scope-partitions", ResetStrategy.to_latest(), "a:0,2", line(100, 20, 8, 10, 5), "only a:0 and a:2"),
    ("15-scope-list", ResetStrategy.to_latest(), ["a:1", "b"], line(50, 30, None, 10, 5), "specs add up"),
    ("16-scope-merge", ResetStrategy.to_latest(), ["a:0", "a"], line(100, 30, 8, 10, 5), "whole topic wins"),
    ("17-scope-empty-string", ResetStrategy.to_latest(), "", line(100, 30, 8, 10, 5), "empty means all"),
    ("18-scope-empty-list", ResetStrategy.to_latest(), [], line(100, 30, 8, 10, 5), "no specs means all"),
    ("19-file-in-scope", ResetStrategy.from_file("a,1,3"), "a", line(50, 3, None, 10, 5), "file inside scope"),
]


@pytest.mark.parametrize(("strategy", "scope", "expected", "why"), [c[1:] for c in STRATEGIES],
                         ids=[c[0] for c in STRATEGIES])
def test_plan_targets(strategy, scope, expected, why):
    plan = plan_reset(strategy, parse_scope(scope), INPUTS)
    assert plan.checkpoint_offsets() == expected, why
    changed = {r.partition for r in plan.rows if r.in_scope}
    assert plan.changes() == {tp: off for tp, off in expected.items() if tp in changed}


@pytest.mark.parametrize(
    ("strategy", "partition", "requested", "target", "warning"),
    [
        pytest.param(ResetStrategy.to_offset(500), A0, 500, 100, "above the high watermark 100", id="01-clamp-high"),
        pytest.param(ResetStrategy.to_offset(3), A0, 3, 10, "below the low watermark 10", id="02-clamp-low"),
        pytest.param(ResetStrategy.shift_by(-60), A0, -10, 10, "below the low watermark 10", id="03-shift-low"),
        pytest.param(ResetStrategy.to_offset(50), A0, 50, 50, None, id="04-inside-no-warning"),
        pytest.param(ResetStrategy.to_offset(100), A0, 100, 100, None, id="05-at-high-is-inside"),
        pytest.param(ResetStrategy.to_offset(4), A2, 4, 4, "new partition", id="06-new-partition-noted"),
    ],
)
def test_clamping_is_reported(strategy, partition, requested, target, warning):
    plan = plan_reset(strategy, parse_scope(None), INPUTS)
    row = next(r for r in plan.rows if r.partition == partition)
    assert (row.requested, row.target) == (requested, target)
    if warning is None:
        assert row.warning is None
    else:
        assert warning in row.warning
        assert any(w.startswith(f"{partition}: ") for w in plan.warnings)


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        pytest.param(ResetStrategy.to_offset(500), "target 500 for a:0 is above the high watermark 100", id="high"),
        pytest.param(ResetStrategy.to_offset(3), "target 3 for a:0 is below the low watermark 10", id="low"),
    ],
)
def test_strict_refuses_instead_of_clamping(strategy, message):
    with pytest.raises(OffsetPlanError, match=message) as info:
        plan_reset(strategy, parse_scope("a:0"), INPUTS, strict=True)
    assert "without strict" in str(info.value)


def test_strict_accepts_targets_in_range():
    plan = plan_reset(ResetStrategy.to_offset(50), parse_scope("a:0"), INPUTS, strict=True)
    assert plan.changes() == {A0: 50}


def test_rows_hold_current_group_and_watermarks():
    plan = plan_reset(ResetStrategy.to_latest(), parse_scope("a:1"), INPUTS)
    rows = {r.partition: r for r in plan.rows}
    assert rows[A1] == type(rows[A1])(A1, True, 20, 15, 0, 30, 30, 30, None)
    assert rows[B0].in_scope is False and rows[B0].target == 10 and rows[B0].group_offset is None


def test_checkpoint_partition_gone_from_topic():
    inputs = ResetInputs(
        partitions_by_topic={"a": 1},
        checkpoint={A0: 5, A1: 6, TopicPartition("gone", 0): 7},
        group={},
        watermarks={A0: (0, 10)},
    )
    everything = plan_reset(ResetStrategy.to_current(), parse_scope(None), inputs)
    assert everything.checkpoint_offsets() == {A0: 5}, "in scope, gone partitions are dropped from the line"
    assert sum("dropped" in w for w in everything.warnings) == 2
    narrow = plan_reset(ResetStrategy.to_latest(), parse_scope("a:0"), inputs)
    assert narrow.checkpoint_offsets() == {A0: 10, A1: 6, TopicPartition("gone", 0): 7}, "out of scope: kept"


def test_renderings():
    plan = plan_reset(ResetStrategy.to_offset(25), parse_scope("a"), INPUTS)
    assert plan.to_csv() == "a,0,25\na,1,25\na,2,8\n"
    data = json.loads(plan.to_json())
    assert data["strategy"] == "to-offset" and data["scope"] == "a"
    assert data["partitions"][2] == {
        "topic": "a", "partition": 2, "in_scope": True, "checkpoint_offset": None, "group_offset": None,
        "low": 0, "high": 8, "requested": 25, "target": 8,
        "warning": "requested 25 is above the high watermark 8 (no record has been written there yet); clamped to 8",
    }
    table = plan_text(plan).splitlines()
    assert table[0].split()[:8] == ["TOPIC", "PARTITION", "CHECKPOINT", "GROUP", "LOW", "HIGH", "REQUESTED",
                                    "NEW-OFFSET"]
    assert table[1].split()[:8] == ["a", "0", "50", "50", "10", "100", "25", "25"]
    assert "out of scope: unchanged" in table[4]
    # a-0 moves back from 50 to 25; a-1 forward; a-2 has no checkpoint offset: 25 records are read again.
    assert table[-1] == ("reset to-offset 25; scope: a; 3 partition(s) change, 1 warning(s); 25 record(s) are read "
                         "again (a Kafka sink writes them again unless it skips replays)")
    assert data["records_read_again"] == 25


def test_export_round_trips_through_from_file():
    plan = plan_reset(ResetStrategy.shift_by(-5), parse_scope(None), INPUTS)
    again = plan_reset(ResetStrategy.from_file(plan.to_csv()), parse_scope(None), INPUTS)
    assert again.checkpoint_offsets() == plan.checkpoint_offsets()


@pytest.mark.parametrize(
    ("text", "timezone", "expected"),
    [
        pytest.param("2024-05-01T12:00:00Z", None, "2024-05-01T12:00:00+00:00", id="01-utc"),
        pytest.param("2024-05-01T14:00:00+02:00", None, "2024-05-01T14:00:00+02:00", id="02-offset"),
        pytest.param("2024-07-01T12:00:00", "Europe/Paris", "2024-07-01T12:00:00+02:00", id="03-naive-with-tz"),
        pytest.param("2024-05-01T12:00:00Z", "Asia/Tokyo", "2024-05-01T12:00:00+00:00", id="04-text-offset-wins"),
        pytest.param("2024-05-01", "UTC", "2024-05-01T00:00:00+00:00", id="05-date-only-midnight"),
        pytest.param("2024-05-01 12:00:00.250Z", None, "2024-05-01T12:00:00.250000+00:00", id="06-space-millis"),
    ],
)
def test_parse_datetime(text, timezone, expected):
    assert parse_datetime(text, timezone).isoformat() == expected


def test_datetime_and_duration_give_epoch_millis():
    assert ResetStrategy.to_datetime(parse_datetime("2024-05-01T12:00:00.250Z")).timestamp_ms == 1714564800250
    assert ResetStrategy.by_duration("P1DT2H30M", NOW).timestamp_ms == 1714564800000 - (26 * 3600 + 1800) * 1000
    assert parse_duration("PT1.5S").total_seconds() == 1.5
    assert parse_duration("pt30m").total_seconds() == 1800


# (id, call, message fragment) — every refused input changes nothing and says what to do.
BAD = [
    ("01-unknown-strategy", lambda: parse_strategy("to-yesterday"), "unknown reset strategy 'to-yesterday'"),
    ("02-missing-value", lambda: parse_strategy("to-offset"), "needs a value (an offset like 42"),
    ("03-value-not-taken", lambda: parse_strategy("to-latest", "5"), "takes no value"),
    ("04-offset-words", lambda: parse_strategy("to-offset", "ten"), "value 'ten' is not a whole number"),
    ("05-offset-negative", lambda: parse_strategy("to-offset", "-1"), "must be >= 0, got -1; use to-earliest"),
    ("06-shift-fraction", lambda: parse_strategy("shift-by", "1.5"), "shift-by value '1.5' is not a whole number"),
    ("07-naive-datetime", lambda: parse_strategy("to-datetime", "2024-05-01T12:00:00"), "has no timezone"),
    ("08-garbage-datetime", lambda: parse_datetime("yesterday"), "is not understood; write an ISO 8601"),
    ("09-time-only", lambda: parse_datetime("12:00Z"), "starting with the date"),
    ("10-impossible-date", lambda: parse_datetime("2024-02-30T00:00:00Z"), "is not a valid date-time"),
    ("11-unknown-timezone", lambda: parse_datetime("2024-05-01T12:00", "Mars/Base"), "timezone 'Mars/Base'"),
    ("12-before-epoch", lambda: parse_strategy("to-datetime", "1960-01-01T00:00:00Z"), "before 1970"),
    ("13-duration-shorthand", lambda: parse_strategy("by-duration", "1h", now=NOW), "not an ISO 8601 duration"),
    ("14-duration-weeks", lambda: parse_duration("P1W"), "count in days"),
    ("15-duration-negative", lambda: parse_duration("-PT1H"), "use to-latest"),
    ("16-duration-empty-time", lambda: parse_duration("PT"), "of the form PnDTnHnMnS"),
    ("17-duration-without-now", lambda: parse_strategy("by-duration", "PT1H"), "needs the current time"),
    ("18-recorded-bad-json", lambda: parse_strategy("to-recorded", "{oops"), "to-recorded offsets are invalid"),
    ("19-offset-map-special", lambda: parse_strategy("to-offset", '{"a":{"0":-1}}'), "offset -1 of a:0 is invalid"),
    ("20-file-bad-line", lambda: parse_strategy("from-file", "a,0,x"), "line 1 ('a,0,x'): offset 'x'"),
    ("21-scope-unknown-topic", lambda: plan_reset(ResetStrategy.to_latest(), parse_scope("c"), INPUTS),
     "topic 'c', which is not one of the job's topics (a, b)"),
    ("22-scope-unknown-partition", lambda: plan_reset(ResetStrategy.to_latest(), parse_scope("a:1,7"), INPUTS),
     "partition(s) 7 of topic 'a', which has 3 partitions (0..2)"),
    ("23-scope-no-partitions", lambda: parse_scope("a:"), "comma-separated list of numbers"),
    ("24-scope-word-partition", lambda: parse_scope("a:x"), "scope 'a:x': partitions must be"),
    ("25-scope-negative", lambda: parse_scope("a:-1"), "numbers >= 0"),
    ("26-scope-double-comma", lambda: parse_scope("a:0,,1"), "comma-separated"),
    ("27-scope-no-topic", lambda: parse_scope(":0"), "has no topic name"),
    ("28-scope-empty-item", lambda: parse_scope(["a", " "]), "empty topic in the scope"),
    ("29-file-outside-scope", lambda: plan_reset(ResetStrategy.from_file("b,0,1"), parse_scope("a"), INPUTS),
     "sets b:0, which is outside the scope 'a'"),
    ("30-file-unknown-topic", lambda: plan_reset(ResetStrategy.from_file("z,0,1"), parse_scope(None), INPUTS),
     "'z' is not one of the job's topics"),
    ("31-file-unknown-partition", lambda: plan_reset(ResetStrategy.from_file("b,2,1"), parse_scope(None), INPUTS),
     "topic 'b' has 2 partitions (0..1)"),
    ("32-timestamps-not-looked-up", lambda: plan_reset(
        ResetStrategy.to_datetime(NOW), parse_scope(None), ResetInputs({"a": 1}, {}, {}, {A0: (0, 1)})),
     "no offset was looked up for a:0"),
    ("33-empty-recorded", lambda: ResetStrategy.to_recorded({}, "savepoint sp2"), "savepoint sp2 lists none"),
    ("34-offset-bool", lambda: ResetStrategy.to_offset(True), "must be a whole number"),
]


@pytest.mark.parametrize(("call", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_is_refused_with_a_clear_message(call, message):
    with pytest.raises(OffsetPlanError) as info:
        call()
    assert message in str(info.value)


def test_strategy_kinds_round_trip_by_name():
    assert parse_strategy("--to-earliest").kind is StrategyKind.TO_EARLIEST
    assert parse_strategy("TO-CURRENT").kind is StrategyKind.TO_CURRENT
    assert parse_strategy("to-datetime", "2024-05-01T12:00:00", timezone="UTC").timestamp_ms == 1714564800000
    assert parse_strategy("by-duration", "PT1H", now=NOW).needs_timestamp_lookup
    assert not parse_strategy("to-latest").needs_timestamp_lookup
