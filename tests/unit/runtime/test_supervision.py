"""The supervision component on its own: stop requests, the drain, a kill, a withdrawn request, the drain's
timeout, a second SIGTERM and the fence, against a fake query and a fake job home (no Spark)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.runtime.heartbeat import Heartbeat
from airflow_kafka_stream.runtime.run_state import RunState
from airflow_kafka_stream.runtime.supervision import BatchHeld, Supervision
from airflow_kafka_stream.storage import status as st
from tests.unit.checkpoint.test_planned_batch import OFFSET_METADATA, checkpoint


class Query:
    """Active for ``polls`` polls; Spark's trigger is active while ``trigger_active``."""

    def __init__(self, polls: int = 10_000, trigger_active: bool = True, failure: str | None = None) -> None:
        self.polls, self.isActive, self.stopped, self.failure = polls, True, 0, failure
        self.status = {"isTriggerActive": trigger_active}
        self.on_poll = lambda n: None
        self.polled = 0

    def awaitTermination(self, _timeout):  # noqa: N802 - Spark's API
        self.polled += 1
        self.on_poll(self.polled)
        if self.polled >= self.polls:
            self.isActive = False

    def stop(self) -> None:
        self.stopped += 1
        self.isActive = False

    def exception(self):
        return self.failure


class Home:
    """The control files: a stop request and the source's drained answer."""

    def __init__(self) -> None:
        self.request: dict | None = None
        self.drained_answer: dict | None = None
        self.cleared_drained = 0

    def stop_request(self, *, unreadable_stands: bool = False):
        return self.request

    def stop_requested(self) -> bool:
        return self.request is not None

    def request_stop(self, by: str, mode: str = "drain") -> None:
        self.request = {"by": by, "mode": mode, "requested_at": "2024-01-01T00:00:00+00:00"}

    def drained(self):
        return self.drained_answer

    def clear_drained(self) -> bool:
        self.cleared_drained += 1
        return True


def make(tmp_path, query: Query, **config) -> tuple[Supervision, RunState, Home]:
    settings = dict(job_name="orders", heartbeat_seconds=5.0, stop_poll_seconds=0.0, drain_timeout_seconds=300.0,
                    storage_options={})
    settings.update(config)
    cfg = SimpleNamespace(**settings)
    run = RunState()
    run.query, run.checkpoint_location = query, str(tmp_path / "checkpoint")  # no checkpoint: nothing in flight
    home = Home()
    home.url = str(tmp_path)
    beat = Heartbeat(run, cfg, home, committer=None, skipped=None, time_lag=None, metrics=lambda: None,
                     generation=lambda: 1)
    recorded = []
    supervision = Supervision(run, cfg, home, beat, lambda *args, **kwargs: recorded.append((args, kwargs)))
    supervision.recorded = recorded
    return supervision, run, home


def test_a_query_that_ends_by_itself_was_not_stopped_by_request(tmp_path):
    supervision, run, _home = make(tmp_path, Query(polls=3))
    assert supervision.supervise() is False
    assert run.state == JobState.STARTING and run.query.stopped == 0


def test_a_failed_query_is_raised(tmp_path):
    supervision, _run, _home = make(tmp_path, Query(polls=1, failure="boom"))
    with pytest.raises(RuntimeError, match="the streaming query failed: boom"):
        supervision.supervise()


def test_a_stop_request_drains_once_spark_is_between_batches(tmp_path):
    query = Query(trigger_active=False)
    supervision, run, home = make(tmp_path, query)
    home.request_stop("ops")
    assert supervision.supervise() is True
    assert run.state == JobState.DRAINING and query.stopped == 1
    assert (run.stop_requested_by, run.stop_requested_at) == ("ops", "2024-01-01T00:00:00+00:00")
    assert not run.stopped_at_once, "drained: a run that completes"


def test_the_sources_drained_answer_ends_the_drain_when_its_offsets_are_the_last_committed(tmp_path):
    query = Query(trigger_active=True)
    supervision, run, home = make(tmp_path, query)
    run.last_offsets = {TopicPartition("t", 0): 5}
    home.request_stop("ops")
    home.drained_answer = {"offsets": {"t": {"0": 5}}}
    assert supervision.supervise() is True and query.stopped == 1


def test_a_kill_request_stops_at_once_and_says_so(tmp_path):
    query = Query()
    supervision, run, home = make(tmp_path, query)
    home.request_stop("ops", mode="kill")
    assert supervision.supervise() is True
    assert query.stopped == 1 and run.state == JobState.STARTING, "no drain"
    assert run.note == "stopped at once on a kill request by ops; no batch was in flight"
    assert run.stopped_at_once, "an aborted run, as lineage reports it"


def test_a_second_sigterm_stops_at_once(tmp_path):
    supervision, run, _home = make(tmp_path, Query())
    supervision._signalled = 2
    assert supervision.supervise() is True
    assert run.note.startswith("stopped at once on a second SIGTERM")


def test_a_first_sigterm_writes_a_stop_request_and_drains(tmp_path):
    query = Query(trigger_active=False)
    supervision, run, home = make(tmp_path, query)
    supervision._signalled = 1
    assert supervision.supervise() is True
    assert home.request["by"] == "SIGTERM" and run.state == JobState.DRAINING


def test_a_withdrawn_request_returns_to_running(tmp_path):
    query = Query(polls=6)
    supervision, run, home = make(tmp_path, query)
    home.request_stop("ops")
    query.on_poll = lambda n: setattr(home, "request", None) if n == 2 else None
    states = []
    original = supervision.heartbeat.set_state
    supervision.heartbeat.set_state = lambda state: (states.append(state), original(state))
    assert supervision.supervise() is False
    assert states == [JobState.DRAINING, JobState.RUNNING] and run.state == JobState.RUNNING
    assert run.stop_requested_by is None and run.stop_requested_at is None and home.cleared_drained == 1


def test_a_drain_past_its_timeout_is_flagged_once_and_goes_on(tmp_path, caplog):
    query = Query(polls=5)  # the running batch never finishes; the query ends on its own after 5 polls
    supervision, run, home = make(tmp_path, query, drain_timeout_seconds=0.0)
    home.request_stop("ops")
    with caplog.at_level(logging.WARNING):
        assert supervision.supervise() is True
    assert run.drain_overdue is True and query.stopped == 0
    assert caplog.text.count("still draining") == 1


def test_a_silent_heartbeat_fences_the_run(tmp_path):
    query = Query()
    supervision, run, _home = make(tmp_path, query, heartbeat_seconds=0.01)
    supervision.heartbeat._last_beat_ok -= st.FENCE_AFTER_INTERVALS * 0.01 + 1
    with pytest.raises(JobStateError, match="fenced: .*the status write has not returned"):
        supervision.supervise()
    assert query.stopped >= 1 and run.fence_reason is not None


def test_the_end_of_the_run_records_a_batch_only_the_checkpoint_knows(tmp_path):
    supervision, run, _home = make(tmp_path, Query())
    run.last_batch_id = None
    supervision.catch_up_with_checkpoint()  # no checkpoint: nothing to record
    assert supervision.recorded == []


def test_the_batch_gate_lets_batches_run_until_a_drain_begins(tmp_path):
    supervision, _run, home = make(tmp_path, Query(polls=3))
    supervision.gate(0)
    supervision.gate(1)
    assert supervision.entered_batch == 1 and supervision.held_batch is None
    supervision.draining = True
    with pytest.raises(BatchHeld, match="batch 2 was planned after the stop request"):
        supervision.gate(2)
    assert supervision.held_batch == 2


def test_a_batch_planned_during_a_drain_is_held_withdrawn_and_the_drain_ends_after_the_running_batch(tmp_path):
    """Spark's connector plans the next batch whatever the request: the gate holds it before the job's function
    runs, the query ends, and the checkpoint ends at the batch that was running."""
    query = Query(trigger_active=True)  # never seen between batches: only the gate can end this drain
    supervision, run, home = make(tmp_path, query)
    root = tmp_path / "cp"
    run.checkpoint_location = checkpoint(root, committed=4, planned=None)
    supervision.gate(4)
    home.request_stop("ops")

    def spark_plans_batch_5(poll: int) -> None:
        if poll == 2:
            (root / "offsets" / "5").write_text(f'v1\n{OFFSET_METADATA}\n{{"t":{{"0":50}}}}')
            with pytest.raises(BatchHeld):
                supervision.gate(5)
            query.isActive, query.failure = False, "ForeachBatchUserFuncException: BatchHeld"

    query.on_poll = spark_plans_batch_5
    assert supervision.supervise() is True, "a drained stop, not a failure"
    position = read_position(run.checkpoint_location)
    assert (position.batch_id, position.in_flight_batch_id) == (4, None)


def test_a_batch_in_flight_from_an_earlier_run_is_held_but_never_withdrawn(tmp_path):
    """A crashed run's batch may have written part of its output: held by a drain before its re-run, it stays in
    the checkpoint so that Spark re-runs it over the same range."""
    query = Query(trigger_active=True)
    supervision, run, home = make(tmp_path, query)
    run.checkpoint_location = checkpoint(tmp_path / "cp", committed=4, planned=5)
    home.request_stop("ops")

    def spark_re_runs_batch_5(poll: int) -> None:
        if poll == 2:
            with pytest.raises(BatchHeld):
                supervision.gate(5)
            query.isActive, query.failure = False, "ForeachBatchUserFuncException: BatchHeld"

    query.on_poll = spark_re_runs_batch_5
    assert supervision.supervise() is True
    assert read_position(run.checkpoint_location).in_flight_batch_id == 5


def test_a_batch_planned_as_the_drain_stops_the_query_is_withdrawn(tmp_path):
    """Between the look that found Spark between batches and the stop, a trigger planned batch 5; the stop cut it
    off before its function ran (the gate never saw it): the checkpoint ends at batch 4."""
    query = Query(trigger_active=False)
    supervision, run, home = make(tmp_path, query)
    root = tmp_path / "cp"
    run.checkpoint_location = checkpoint(root, committed=4, planned=None)
    supervision.gate(4)
    home.request_stop("ops")
    stop = query.stop

    def stop_while_planning() -> None:
        (root / "offsets" / "5").write_text(f'v1\n{OFFSET_METADATA}\n{{"t":{{"0":50}}}}')
        stop()

    query.stop = stop_while_planning
    assert supervision.supervise() is True
    position = read_position(run.checkpoint_location)
    assert (position.batch_id, position.in_flight_batch_id) == (4, None)
