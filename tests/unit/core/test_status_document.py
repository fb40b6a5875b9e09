"""core.job_state and core.status_document: one vocabulary of states, one typed status parsed in one place."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core import job_watch, liveness
from airflow_kafka_stream.core.job_state import ALL_STATES, FINAL_STATES, LIVE_STATES, JobState, state_names
from airflow_kafka_stream.core.status_document import GroupCommits, StatusDocument
from airflow_kafka_stream.storage import status as storage_status

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)

#: A status as the driver's runtime writes it (runtime's ``status()``), every key present.
WRITTEN = {
    "job": "orders", "state": "RUNNING", "application_id": "local-1", "query_id": "q", "run_id": "r",
    "generation": 3, "checkpoint": "/h/checkpoints/0003", "group": "g1", "last_batch_id": 41,
    "last_offsets": {"t": {"0": 10}}, "batches_this_run": 5, "records_this_run": 500, "dead_letters": 2,
    "read_placement": {"mode": "driver"}, "lag_samples": [[1.0, 40, 3]], "heartbeat": NOW.isoformat(),
    "heartbeat_epoch": NOW.timestamp(), "heartbeat_interval_seconds": 5, "clock_skew_seconds": 1.5,
    "pid": 11, "jvm_pid": 12, "host": "h1", "started_at": NOW.isoformat(), "stopped_at": None,
    "stop_requested_at": None, "stop_requested_by": None, "drain_overdue": False, "note": None, "error": None,
    "group_commits": {"successes": 4, "failures": 1, "replaced_while_pending": 0, "consecutive_failures": 1,
                      "last_error": "timeout", "last_error_at": "x", "committed_batch": 40,
                      "committed_offsets": {"t": {"0": 9}}, "committed_at": "y", "pending_batch": 41},
}


def test_a_state_is_its_name_as_a_string():
    assert JobState.RUNNING == "RUNNING" and "RUNNING" in LIVE_STATES and "STOPPED" in FINAL_STATES
    assert json.dumps({"state": JobState.FAILED}) == '{"state": "FAILED"}'
    assert f"{JobState.DRAINING}" == "DRAINING"
    assert LIVE_STATES | FINAL_STATES == ALL_STATES == set(JobState)
    assert state_names(ALL_STATES) == ["DRAINING", "FAILED", "RUNNING", "STARTING", "STOPPED"]


@pytest.mark.parametrize(("case", "value", "expected", "why"), [
    ("member", JobState.STOPPED, JobState.STOPPED, "a member is itself"),
    ("name", "DRAINING", JobState.DRAINING, "the driver writes the name"),
    ("lower-case", "running", None, "states are written in capitals; another spelling is not one"),
    ("unknown", "PAUSED", None, "an unknown state is none of ours"),
    ("absent", None, None, "no state written"),
    ("mistyped", 3, None, "a number is not a state"),
], ids=lambda c: c if isinstance(c, str) and c.islower() else None)
def test_parse_a_state(case, value, expected, why):
    assert JobState.parse(value) is expected, why


def test_the_groupings_are_named_once():
    assert [s for s in JobState if s.is_live] == [JobState.STARTING, JobState.RUNNING, JobState.DRAINING]
    assert [s for s in JobState if s.is_final] == [JobState.STOPPED, JobState.FAILED]
    assert JobState.live() is LIVE_STATES and JobState.final() is FINAL_STATES
    # No module keeps the states by an older name of its own: core.job_state is their one home.
    for module in (storage_status, job_watch, liveness):
        for older in ("ACTIVE_STATES", "KNOWN_STATES", "STARTING", "RUNNING", "DRAINING", "STOPPED", "FAILED"):
            assert not hasattr(module, older), f"{module.__name__}.{older}"


def test_every_key_the_runtime_writes_is_typed():
    doc = StatusDocument.parse(WRITTEN)
    assert doc is not None
    assert (doc.state, doc.job, doc.application_id, doc.generation, doc.last_batch_id) == (
        JobState.RUNNING, "orders", "local-1", 3, 41)
    assert (doc.pid, doc.jvm_pid, doc.host) == (11, 12, "h1")
    assert doc.started_at == NOW and doc.heartbeat == NOW and doc.stopped_at is None
    assert (doc.heartbeat_epoch, doc.heartbeat_interval_seconds, doc.clock_skew_seconds) == (
        NOW.timestamp(), 5.0, 1.5)
    assert doc.last_offsets == {"t": {"0": 10}} and doc.read_placement == {"mode": "driver"}
    assert (doc.batches_this_run, doc.records_this_run, doc.dead_letters) == (5, 500, 2)
    assert doc.lag_samples == ([1.0, 40, 3],)
    assert doc.group_commits == GroupCommits(4, 1, 0, 1, "timeout", "x", 40, {"t": {"0": 9}}, "y", 41)
    assert doc.is_live and not doc.is_final
    assert doc.heartbeat_age(NOW.timestamp() + 2) == pytest.approx(2.0)
    assert doc.to_dict() == WRITTEN and doc.to_dict() is not doc.raw, "to_dict gives back the raw document"


CASES = [
    # id, raw, field, expected, why
    ("none", None, None, None, "no status file: no document"),
    ("empty", {}, None, None, "an empty document is no status, as every reader treats it"),
    ("not-a-mapping", ["RUNNING"], None, None, "a JSON list is not a status"),
    ("batch-id-older-key", {"state": "RUNNING", "batch_id": 7}, "last_batch_id", 7,
     "older runtimes wrote batch_id; ops/stop.py reads either"),
    ("last-batch-id-wins", {"state": "RUNNING", "batch_id": 7, "last_batch_id": 9}, "last_batch_id", 9,
     "last_batch_id is what the runtime writes now"),
    ("unknown-state", {"state": "PAUSED"}, "state", None, "an unknown state parses to None..."),
    ("unknown-state-kept", {"state": "PAUSED"}, "state_text", "PAUSED", "...and is kept as written for messages"),
    ("bool-epoch", {"state": "RUNNING", "heartbeat_epoch": True}, "heartbeat_epoch", None,
     "a boolean is no heartbeat time (core.liveness agrees)"),
    ("bool-pid", {"state": "RUNNING", "pid": True}, "pid", None, "a boolean is no pid"),
    ("string-pid", {"state": "RUNNING", "pid": "11"}, "pid", None, "a pid is a JSON number"),
    ("bad-time", {"state": "RUNNING", "started_at": "yesterday"}, "started_at", None, "not ISO-8601: no time"),
    ("no-group-commits", {"state": "STARTING"}, "group_commits", None, "a starting driver has committed nothing"),
    ("offsets-not-object", {"state": "RUNNING", "last_offsets": "t:0:1"}, "last_offsets", None,
     "offsets are a JSON object of topics"),
    ("drain-overdue", {"state": "DRAINING", "drain_overdue": True}, "drain_overdue", True, "the flag as written"),
    ("app-version-number", {"state": "RUNNING", "app_version": 2}, "app_version", "2",
     "a version is compared as text, as job.json's"),
    ("final", {"state": "FAILED", "error": "boom"}, "error", "boom", "the driver's last error"),
]


@pytest.mark.parametrize(("case", "raw", "field", "expected", "why"), CASES, ids=[c[0] for c in CASES])
def test_parse(case, raw, field, expected, why):
    doc = StatusDocument.parse(raw)
    if field is None:
        assert doc is None, why
        return
    assert doc is not None
    assert getattr(doc, field) == expected, why
    assert doc.to_dict() == raw, "the raw document is kept whole"


@pytest.mark.parametrize(("case", "raw", "live", "final"), [
    ("running", {"state": "RUNNING"}, True, False),
    ("draining", {"state": "DRAINING"}, True, False),
    ("stopped", {"state": "STOPPED"}, False, True),
    ("unknown", {"state": "PAUSED"}, False, False),
], ids=lambda c: c if isinstance(c, str) else None)
def test_live_and_final(case, raw, live, final):
    doc = StatusDocument.parse(raw)
    assert (doc.is_live, doc.is_final) == (live, final)


def test_the_heartbeat_age_agrees_with_the_liveness_rule():
    for raw in ({"state": "RUNNING", "heartbeat_epoch": NOW.timestamp() - 12},
                {"state": "RUNNING", "heartbeat_epoch": "soon"}, {"state": "RUNNING"}):
        assert StatusDocument.parse(raw).heartbeat_age(NOW) == liveness.heartbeat_age(StatusDocument.parse(raw), NOW)


def test_the_document_is_frozen():
    doc = StatusDocument.parse({"state": "RUNNING"})
    with pytest.raises(AttributeError):
        doc.state = JobState.FAILED  # type: ignore[misc]


@pytest.mark.parametrize(("written", "shown"), [
    ("2024-05-01T10:00:00+00:00", "2024-05-01T10:00:00+00:00"),
    ("yesterday", "yesterday"),  # does not parse: heartbeat is None, the message still shows what was written
    (None, None),
])
def test_times_are_shown_as_written(written, shown):
    """Messages show the heartbeat and start time as the driver wrote them, not the parsed time's str()."""
    doc = StatusDocument.parse({"state": "RUNNING", "heartbeat": written, "started_at": written})
    assert (doc.heartbeat_text, doc.started_text) == (shown, shown)


@pytest.mark.parametrize(("status", "expected"), [
    (None, None), ({}, None), ({"state": "RUNNING"}, "RUNNING"), ({"state": "PAUSED"}, "PAUSED"),
    (StatusDocument.parse({"state": "FAILED"}), "FAILED"),
])
def test_the_written_state_of_a_status_read_either_way(status, expected):
    from airflow_kafka_stream.core.status_document import written_state

    assert written_state(status) == expected
