"""Lag objectives (core.objective, ops.objective, the sensor's refusals): numbered tables, each case with why."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.objective import LagObjective, Verdict, judge_objective, trend
from airflow_kafka_stream.core.status_document import TimeLag
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.ops.objective import (
    BREACH_OPERATION,
    breaches,
    look_objective,
    record_objective,
    recorded_objective,
)
from airflow_kafka_stream.storage.jobhome import JobHome

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
OBJECTIVE = LagObjective(120.0, 60.0)


def lag(*seconds: float) -> TimeLag:
    return TimeLag(NOW - timedelta(seconds=2), {"orders": {str(p): s for p, s in enumerate(seconds)}},
                   max(seconds, default=0.0))


def memory(seconds_ago: float, *first: float) -> dict:
    return {"above_since": (NOW - timedelta(seconds=seconds_ago)).isoformat(),
            "first": {"orders": {str(p): s for p, s in enumerate(first)}}}


# (id, time lag, live, memory, expected verdict, reason)
CASES = [
    ("01-met", lag(3.0, 0.0), True, None, Verdict.MET, "3s is within 120s"),
    ("02-at-the-limit", lag(120.0), True, None, Verdict.MET, "exactly at the objective is within it"),
    ("03-above-first-look", lag(200.0, 0.0), True, None, Verdict.ABOVE, "above since now: 0s of 60s"),
    ("04-above-not-long-enough", lag(200.0), True, memory(30, 150.0), Verdict.ABOVE, "above for 30s of 60s"),
    ("05-breach", lag(200.0), True, memory(60, 150.0), Verdict.BREACH, "above for 60s: the whole allowance"),
    ("06-met-ends-the-streak", lag(100.0), True, memory(600, 150.0), Verdict.MET,
     "back within: however long it was above before"),
    ("07-not-running", lag(500.0), False, memory(600, 150.0), Verdict.NOT_RUNNING,
     "a stopped job's last measurement is no lag to hold"),
    ("08-unmeasured", None, True, memory(600, 150.0), Verdict.UNMEASURED,
     "a running job that has not measured yet: wait, never a breach"),
    ("09-bad-memory", lag(200.0), True, {"above_since": "yesterday"}, Verdict.ABOVE,
     "an unreadable memory starts the streak again"),
]


@pytest.mark.parametrize(("time_lag", "live", "kept", "expected", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_verdict(time_lag, live, kept, expected, reason):
    check = judge_objective(OBJECTIVE, time_lag, live, NOW, kept)
    assert check.verdict is expected, f"{reason}: {check.message}"


def test_a_breach_names_the_partitions_their_lag_and_trend():
    check = judge_objective(OBJECTIVE, lag(200.0, 0.0, 130.0, 300.0), True, NOW, memory(90, 150.0, 0.0, 131.0))
    assert check.verdict is Verdict.BREACH
    assert [(r["partition"], r["seconds"], r["trend"]) for r in check.partitions] == [
        (3, 300.0, "new"), (0, 200.0, "rising"), (2, 130.0, "steady")], "most behind first, the caught-up one left out"
    assert check.partitions[1]["change_seconds"] == 50.0
    for text in ("orders:3 300s (new)", "orders:0 200s (rising +50s)", "allowed 60s", "breached"):
        assert text in check.message, check.message
    assert check.memory["above_since"] == (NOW - timedelta(seconds=90)).isoformat()


@pytest.mark.parametrize(("now", "then", "expected"), [(10.0, None, "new"), (10.0, 5.0, "rising"),
                                                       (10.0, 10.5, "steady"), (3.0, 10.0, "falling")],
                         ids=["1-no-earlier-value", "2-up", "3-within-a-second", "4-down"])
def test_trend(now, then, expected):
    assert trend(now, then) == expected


@pytest.mark.parametrize(("max_lag", "duration", "named"), [
    (0, 60, "max_lag_seconds"), (-5, 60, "max_lag_seconds"), (120, 0, "for_seconds"), (120, -1, "for_seconds"),
    ("abc", 60, "max_lag_seconds"), (120, None, "for_seconds"), (True, 60, "max_lag_seconds"),
    (float("inf"), 60, "max_lag_seconds"),
], ids=["1-zero-lag", "2-negative-lag", "3-zero-duration", "4-negative-duration", "5-no-number", "6-missing",
        "7-a-boolean-is-no-number", "8-infinite"])
def test_refused_objectives_name_the_setting(max_lag, duration, named):
    with pytest.raises(InvalidInputError) as refused:
        LagObjective.of(max_lag, duration)
    assert refused.value.settings == (named,) and named in str(refused.value)


def test_numeric_text_is_accepted_as_templates_render_it():
    assert LagObjective.of("120", "60.5") == LagObjective(120.0, 60.5)


@pytest.fixture
def home(tmp_path) -> JobHome:
    found = JobHome(str(tmp_path / "job"))
    found.write_spec({"job": "job", "topics": ["orders"], "group": "g"})
    return found


def write_status(home: JobHome, seconds: list[float], state: JobState = JobState.RUNNING) -> None:
    status = {"state": state.value, "time_lag": {"measured_at": datetime.now(UTC).isoformat(), "max_seconds": max(seconds),
                                                 "partitions": {"orders": {str(p): s for p, s in enumerate(seconds)}},
                                                 "last_batch_delay_seconds": None}}
    with open(home.p("status.json"), "w") as out:
        json.dump(status, out)


def test_the_look_records_the_objective_its_memory_and_each_breach(home):
    record_objective(home, OBJECTIVE, by="test")
    assert recorded_objective(home) == OBJECTIVE
    write_status(home, [3.0, 0.0])
    assert look_objective(home, OBJECTIVE)["status"] == "success"
    write_status(home, [200.0, 0.0])
    start = datetime.now(UTC)
    first = look_objective(home, OBJECTIVE, now=start)
    assert first["status"] == "waiting" and "orders:0 200s" in first["message"]
    breached = look_objective(home, OBJECTIVE, now=start + timedelta(seconds=61))
    assert breached["status"] == "failed" and "breached" in breached["message"]
    assert breached["check"]["partitions"][0]["partition"] == 0
    records = [r for r in home.history() if r["operation"] == BREACH_OPERATION]
    assert len(records) == 1 and records[0]["result"] == "breached" and records[0]["args"] == OBJECTIVE.to_dict()
    assert [b["max_seconds"] for b in breaches(home)] == [200.0]
    # Another objective starts the memory again: not a breach at its first look.
    other = LagObjective(150.0, 30.0)
    record_objective(home, other)
    assert look_objective(home, other, now=start + timedelta(seconds=62))["status"] == "waiting"
    write_status(home, [500.0], JobState.STOPPED)
    assert look_objective(home, other)["status"] == "skipped"


def test_the_sensor_refuses_a_bad_objective_naming_the_parameter():
    from airflow_kafka_stream.sensors.lag_objective import StreamLagObjectiveSensor

    for kwargs, named in (({"max_lag_seconds": 0, "for_seconds": 60}, "max_lag_seconds"),
                          ({"max_lag_seconds": 120, "for_seconds": -1}, "for_seconds")):
        with pytest.raises(InvalidInputError, match=named):
            StreamLagObjectiveSensor(task_id="objective", job_home="/tmp/x", **kwargs)
    templated = StreamLagObjectiveSensor(task_id="objective", job_home="/tmp/x", max_lag_seconds="{{ x }}",
                                         for_seconds="{{ y }}")
    assert templated.max_lag_seconds == "{{ x }}", "a templated value is checked once rendered"


def test_the_trigger_serializes_every_argument():
    from airflow_kafka_stream.triggers.lag_objective import StreamLagObjectiveTrigger

    trigger = StreamLagObjectiveTrigger("/tmp/x", 120.0, 60.0, poll_seconds=5, timeout_seconds=100, by="t")
    path, kwargs = trigger.serialize()
    assert path == "airflow_kafka_stream.triggers.lag_objective.StreamLagObjectiveTrigger"
    assert StreamLagObjectiveTrigger(**kwargs).serialize() == (path, kwargs)


def test_the_job_page_shows_the_objective_and_its_breaches(home):
    from airflow_kafka_stream.plugins.job_page_html import Clock, job_section
    from airflow_kafka_stream.plugins.job_view import objective

    assert objective(home) is None
    record_objective(home, OBJECTIVE)
    write_status(home, [200.0])
    start = datetime.now(UTC)
    look_objective(home, OBJECTIVE, now=start)
    look_objective(home, OBJECTIVE, now=start + timedelta(seconds=61))
    shown = objective(home)
    assert shown["max_lag_seconds"] == 120.0 and shown["last_check"]["verdict"] == "breach"
    view = {"job_home": home.url, "errors": {}, "lag_samples": [], "objective": shown,
            "time_lag_samples": [[start.timestamp(), 50.0], [start.timestamp() + 60, 200.0]]}
    html = job_section(view, Clock(UTC, start + timedelta(seconds=90)))
    assert "Lag objective: time lag at most <b>120 s</b>" in html and 'class="breach"' in html
    assert 'class="limit"' in html, "the seconds plot draws the objective as its limit line"
    assert "orders:0 200s" in html
