"""The heartbeat component on its own: the status it writes, state changes, and when it fences the driver.

Built from a :class:`RunState`, a fake job home and fake collaborators; no Spark, no Kafka.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.runtime import heartbeat as hb
from airflow_kafka_stream.runtime.heartbeat import Heartbeat
from airflow_kafka_stream.runtime.run_state import RunState
from airflow_kafka_stream.storage import status as st

INTERVAL = 0.1


class Query:
    def __init__(self) -> None:
        self.id, self.runId, self.stopped = "q-1", "r-1", 0

    def stop(self) -> None:
        self.stopped += 1


def config(**overrides):
    values = dict(job_name="orders", group_id="orders-group", heartbeat_seconds=INTERVAL, clock_skew_seconds=0.5,
                  storage_options={})
    return SimpleNamespace(**{**values, **overrides})


def make(run: RunState | None = None, **overrides) -> Heartbeat:
    run = run or RunState(starting_offsets="earliest")
    collaborators = dict(
        committer=SimpleNamespace(stats=lambda: {"successes": 3}),
        skipped=SimpleNamespace(collect=lambda: 0, document=lambda: {"offsets": 0}),
        time_lag=SimpleNamespace(poke=lambda _offsets: None, document=lambda: None, samples=lambda: []),
        metrics=lambda: None, generation=lambda: 7, jvm_pid=4242, application_id="app-9")
    collaborators.update(overrides)
    return Heartbeat(run, config(), SimpleNamespace(url="memory://home"), **collaborators)


def test_the_status_reads_the_run_state_and_the_collaborators():
    run = RunState(starting_offsets="earliest")
    run.last_batch_id, run.last_offsets, run.batches, run.records = 4, {TopicPartition("t", 0): 10}, 2, 30
    run.checkpoint_location, run.note, run.dead_letters = "memory://home/checkpoints/0007", "a note", 1
    beat = make(run)
    beat.keep_query(Query())
    doc = beat.status()
    assert doc["state"] == JobState.STARTING and doc["generation"] == 7
    assert (doc["query_id"], doc["run_id"], doc["application_id"], doc["jvm_pid"]) == ("q-1", "r-1", "app-9", 4242)
    assert doc["last_batch_id"] == 4 and doc["last_offsets"] == {"t": {"0": 10}}
    assert (doc["batches_this_run"], doc["records_this_run"], doc["dead_letters"]) == (2, 30, 1)
    assert doc["checkpoint"].endswith("0007") and doc["note"] == "a note" and doc["metrics"] is None
    assert doc["group_commits"] == {"successes": 3} and doc["skipped_offsets"] == {"offsets": 0}
    assert doc["heartbeat_interval_seconds"] == INTERVAL and doc["clock_skew_seconds"] == 0.5
    assert list(doc)[-2:] == ["heartbeat", "heartbeat_epoch"], "stamped last"


def test_the_status_shows_the_metrics_field_when_there_are_metrics():
    doc = make(metrics=lambda: SimpleNamespace(status_field=lambda: {"failing": False})).status()
    assert doc["metrics"] == {"failing": False}


def test_a_state_change_wakes_the_heartbeat():
    run = RunState()
    make(run).set_state(JobState.DRAINING)
    assert run.state == JobState.DRAINING and run.wake_status.is_set()


def test_write_status_is_durable_except_for_beats(monkeypatch):
    writes = []
    monkeypatch.setattr(st, "write_status", lambda url, doc, options, durable: writes.append((url, doc["state"],
                                                                                               durable)))
    beat = make()
    assert beat.write_status() == JobState.STARTING
    beat.write_status(beat=True)
    assert writes == [("memory://home", JobState.STARTING, True), ("memory://home", JobState.STARTING, False)]


def run_heartbeat(beat: Heartbeat, seconds: float) -> None:
    beat.start()
    time.sleep(seconds)
    beat.run.closing.set()
    beat.run.wake_status.set()
    beat.join(5)


def test_a_driver_that_cannot_write_its_status_for_two_intervals_fences_itself(monkeypatch):
    def failing(*_args, **_kwargs):
        raise OSError("the store is down")

    monkeypatch.setattr(hb.st, "write_status", failing)
    run = RunState()
    beat = make(run)
    query = Query()
    beat.keep_query(query)
    run_heartbeat(beat, (st.FENCE_AFTER_INTERVALS + 2) * INTERVAL)
    assert run.fence_reason is not None and "OSError: the store is down" in run.fence_reason
    assert "memory://home/status.json" in run.fence_reason
    assert query.stopped == 1, "the fence stops the query"
    assert beat.silence() >= st.FENCE_AFTER_INTERVALS * INTERVAL


def test_one_failed_write_between_good_ones_does_not_fence(monkeypatch):
    calls = []

    def flaky(*_args, **_kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("a hiccup")

    monkeypatch.setattr(hb.st, "write_status", flaky)
    run = RunState()
    beat = make(run)
    run_heartbeat(beat, 6 * INTERVAL)
    assert len(calls) >= 4 and run.fence_reason is None
    assert beat.silence() < 2 * INTERVAL


def test_a_fence_without_a_query_only_records_why():
    run = RunState()
    make(run).fence(1.5, "the status write has not returned")
    assert run.fence_reason.startswith("fenced: the driver could not write its heartbeat") and "1.5s" in run.fence_reason


@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.DRAINING])
def test_a_state_change_is_written_durably_then_beats_are_not(monkeypatch, state):
    flags: list[bool] = []
    monkeypatch.setattr(hb.st, "write_status", lambda *_args, durable: flags.append(durable))
    run_heartbeat(make(RunState(state=state)), 3.5 * INTERVAL)
    assert len(flags) >= 2 and flags[0] is True and not any(flags[1:]), flags
