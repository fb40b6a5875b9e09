"""The runtime's life around its query: start from group offsets, errors before run, revocable stop,
kill, heartbeat fencing, and `stop` on a job that already ended. Real broker, real Spark."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops import savepoints
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.stop import stop_job
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime, run_stream, takeover
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import read_status
from tests.integration.cli_helpers import cli, commit_group
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def config_for(bootstrap: str, topic: str, **overrides) -> StreamConfig:
    values = {"job_name": "life", "bootstrap_servers": bootstrap, "group_id": unique("life-group"),
              "topics": [topic], "starting_offsets": "earliest", "heartbeat_seconds": 3.0}
    values.update(overrides)
    return StreamConfig(**values)


def wait_for(predicate, what: str, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def run_available_now(spark, home: str, config: StreamConfig) -> tuple[list[int], object]:
    seen: list[int] = []

    def collect(batch_df, _batch_id):
        seen.extend(row.offset for row in batch_df.select("offset").collect())

    runtime = StreamRuntime(spark, home, config)
    result = runtime.run(runtime.read_stream().writeStream.foreachBatch(collect).trigger(availableNow=True))
    return sorted(seen), result


class GatedJob:
    """A runtime running in a thread whose batches hold on executors while ``gate`` exists.

    Holding happens inside Spark tasks, so stopping the query really cancels the batch.
    """

    def __init__(self, spark, home: Path, config: StreamConfig):
        self.gate, self.started = home.parent / "gate", home.parent / "started"
        self.started.mkdir(parents=True, exist_ok=True)
        self.seen: list[int] = []
        self.runtime = StreamRuntime(spark, str(home), config)
        self.result = None
        gate, started, seen = str(self.gate), str(self.started), self.seen

        def write(batch_df, batch_id):
            def hold(rows, batch_id=batch_id):
                Path(started, str(batch_id)).touch()
                deadline = time.monotonic() + 120
                while os.path.exists(gate) and time.monotonic() < deadline:
                    time.sleep(0.05)
                for _ in rows:
                    pass

            batch_df.foreachPartition(hold)
            seen.extend(row.offset for row in batch_df.select("offset").collect())

        writer = self.runtime.read_stream().writeStream.foreachBatch(write).trigger(processingTime="200 milliseconds")
        self.thread = threading.Thread(target=self._run, args=(writer,), daemon=True)
        self.thread.start()

    def _run(self, writer) -> None:
        self.result = self.runtime.run(writer)

    def status(self) -> dict:
        return read_status(self.runtime.home.url) or {}

    def wait_offsets(self, wanted: dict) -> None:
        wait_for(lambda: self.status().get("last_offsets") == wanted, f"the job to commit {wanted}")

    def join(self, timeout: float = 90.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the runtime did not end"
        return self.result


@pytest.fixture
def gated_jobs():
    jobs: list[GatedJob] = []
    yield jobs
    for job in jobs:  # never leave a query running into the next test
        job.gate.unlink(missing_ok=True)
        if job.thread.is_alive():
            JobHome(job.runtime.home.url).request_stop("cleanup", mode="kill")
            job.thread.join(60)


def test_a_fresh_start_from_group_offsets_begins_at_the_groups_committed_offsets(spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("life-group"), 2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(6)], partition=p)
    config = config_for(kafka_bootstrap, topic, starting_offsets="group")
    commit_group(kafka_bootstrap, config.group_id, {TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 1})

    seen, result = run_available_now(spark, str(tmp_path / "home"), config)
    assert result.state == "STOPPED", result.summary()
    assert seen == sorted([4, 5, 1, 2, 3, 4, 5]), "partition 0 from 4 and partition 1 from 1, nothing earlier"
    start = json.loads((tmp_path / "home" / "generations" / "0001.start.json").read_text())
    assert start["offsets"] == {topic: {"0": 4, "1": 1}} and start["starting"] == "group"


def test_a_failure_while_building_ends_failed_and_a_refused_start_is_retried(spark, kafka_bootstrap, tmp_path,
                                                                             monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("life-build"), 1)
    home = str(tmp_path / "home")
    runtime = StreamRuntime(spark, home, config_for(kafka_bootstrap, topic))
    monkeypatch.setattr(takeover, "START_LOCK_WAIT_SECONDS", 0.5)
    with JobHome(home).lock("reset", holder="operator@console"):
        with pytest.raises(JobStateError, match="operator@console"):
            runtime.read_stream()
    assert read_status(home) is None, "a refused start wrote nothing"
    # The retry does the work that the refusal skipped: it picks a generation and starts the heartbeat. A brief
    # holder of the lock (an upgrade writing a standby's go holds it) is waited for, not a reason to fail.
    monkeypatch.setattr(takeover, "START_LOCK_WAIT_SECONDS", 10.0)
    brief = JobHome(home).lock("standby-go", holder="upgrade@airflow")
    brief.__enter__()
    threading.Timer(1.0, brief.__exit__, (None, None, None)).start()
    with pytest.raises(ValueError, match="no such column"):
        with runtime:
            frame = runtime.read_stream()
            assert runtime.generation == 1 and read_status(home)["state"] == "STARTING"
            raise ValueError("no such column: amount")
    failed = read_status(home)
    assert failed["state"] == "FAILED" and "no such column: amount" in failed["error"]
    assert frame is not None
    time.sleep(3 * 1.0)  # several heartbeat intervals: a live heartbeat thread would have rewritten it
    assert read_status(home) == failed, "the heartbeat stopped"
    assert job_is_running(JobHome(home)) == (False, failed)


def test_stop_is_idempotent_on_a_failed_job_and_saves_only_a_consistent_checkpoint(
        spark, kafka_bootstrap, tmp_path, capsys):
    topic = create_topic(kafka_bootstrap, unique("life-failed"), 1)
    produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(3)], partition=0)
    home = tmp_path / "home"
    config = config_for(kafka_bootstrap, topic)
    seen, result = run_available_now(spark, str(home), config)
    assert result.state == "STOPPED" and seen == [0, 1, 2], result.summary()

    # A job that failed inside a batch leaves that batch in flight.
    produce(kafka_bootstrap, topic, [(None, "v3")], partition=0)

    def failing(_batch_df, _batch_id):
        raise RuntimeError("the sink is down")

    runtime = StreamRuntime(spark, str(home), config)
    result = runtime.run(runtime.read_stream().writeStream.foreachBatch(failing).trigger(availableNow=True))
    assert result.state == "FAILED", result.summary()
    stopped = cli(capsys, "stop", "--job-home", home)
    assert stopped.code == 0, stopped.err
    assert "was not running (state FAILED)" in stopped.out and "the sink is down" in stopped.out
    assert cli(capsys, "stop", "--job-home", home).code == 0, "and again"
    # No savepoint of a checkpoint with a batch in flight; nothing changed.
    refused = cli(capsys, "stop", "--job-home", home, "--savepoint")
    assert refused.code == 2 and "batch 1 in flight" in refused.err and "none was taken" in refused.err
    assert not (home / "savepoints").exists()

    # Restarted, it re-runs batch 1; then its code fails before the next query starts: FAILED with
    # nothing in flight, so a savepoint of the last committed batch is consistent and is taken.
    seen, result = run_available_now(spark, str(home), config)
    assert result.state == "STOPPED" and seen == [3], result.summary()

    def broken(_frame, _runtime):
        raise RuntimeError("bad sink configuration")

    with pytest.raises(RuntimeError, match="bad sink configuration"):
        run_stream(spark, str(home), config, broken)
    assert read_status(str(home))["state"] == "FAILED"
    made = stop_job(JobHome(str(home)), savepoint=True).to_dict()
    assert made["state"] == "FAILED" and not made["was_running"]
    assert made["savepoint"]["batch_id"] == 1 and made["savepoint"]["offsets"] == {topic: {"0": 4}}


def test_a_drain_between_triggers_ends_without_waiting_for_the_next_one(spark, kafka_bootstrap, tmp_path):
    """With a two-minute trigger the source would answer "drained" only at the next trigger; Spark found between
    triggers with no batch in flight has drained already, so a stop with a 30 s limit ends STOPPED, every record
    read once."""
    topic = create_topic(kafka_bootstrap, unique("between"), 1)
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(5)])
    home = tmp_path / "home"
    runtime = StreamRuntime(spark, str(home), config_for(kafka_bootstrap, topic))
    seen: list[int] = []
    results: list = []
    writer = (runtime.read_stream().writeStream
              .foreachBatch(lambda df, _id: seen.extend(r.offset for r in df.select("offset").collect()))
              .trigger(processingTime="120 seconds"))
    thread = threading.Thread(target=lambda: results.append(runtime.run(writer)), daemon=True)
    thread.start()
    try:
        wait_for(lambda: (read_status(str(home)) or {}).get("last_offsets") == {topic: {"0": 5}}, "the first batch")
        stopped = stop_job(JobHome(str(home)), timeout=30)
        assert (stopped.state, stopped.killed) == ("STOPPED", False), stopped
        thread.join(30)
        assert not thread.is_alive() and results[0].state == "STOPPED", results
        assert sorted(seen) == list(range(5))
        assert (read_status(str(home)) or {}).get("last_offsets") == {topic: {"0": 5}}
    finally:
        if thread.is_alive():
            JobHome(str(home)).request_stop("cleanup", mode="kill")
            thread.join(60)


def test_a_stop_that_times_out_is_withdrawn_and_the_job_keeps_running(spark, kafka_bootstrap, tmp_path, gated_jobs):
    topic = create_topic(kafka_bootstrap, unique("life-withdraw"), 1)
    home = tmp_path / "home"
    # A drain deadline shorter than the test: the runtime must not kill the batch on its own.
    job = GatedJob(spark, home, config_for(kafka_bootstrap, topic, drain_timeout_seconds=1.0))
    gated_jobs.append(job)
    job.gate.touch()
    produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(3)], partition=0)
    wait_for(lambda: (job.started / "0").exists(), "batch 0 to start")

    with pytest.raises(JobStateError) as refusal:
        stop_job(JobHome(str(home)), timeout=2, poll=0.2)
    assert "withdrawn and the job keeps running (it reports RUNNING again" in str(refusal.value)
    assert not (home / "control" / "stop").exists()
    time.sleep(2.5)  # past the runtime's drain deadline
    status = job.status()
    assert status["state"] == "RUNNING" and status["error"] is None and job.thread.is_alive(), status
    assert status["stop_requested_by"] is None

    job.gate.unlink()  # the slow batch finishes; the source plans new data again
    job.wait_offsets({topic: {"0": 3}})
    produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(3, 5)], partition=0)
    job.wait_offsets({topic: {"0": 5}})

    stopped = stop_job(JobHome(str(home)), timeout=60, poll=0.2).to_dict()
    assert stopped["state"] == "STOPPED" and stopped["was_running"] and not stopped["killed"]
    result = job.join()
    assert (result.state, result.exit_code, result.last_batch_id) == ("STOPPED", 0, 1), result.summary()
    assert sorted(job.seen) == [0, 1, 2, 3, 4]


def held_in_batch_1(spark, kafka_bootstrap, home: Path, gated_jobs, name: str, **overrides):
    """A job that committed batch 0 (offsets 0-2) and is held inside batch 1 (offsets 3-4): a drain cannot end."""
    topic = create_topic(kafka_bootstrap, unique(name), 1)
    config = config_for(kafka_bootstrap, topic, **overrides)
    job = GatedJob(spark, home, config)
    gated_jobs.append(job)
    produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(3)], partition=0)
    job.wait_offsets({topic: {"0": 3}})
    job.gate.touch()
    produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(3, 5)], partition=0)
    wait_for(lambda: (job.started / "1").exists(), "batch 1 to start")
    return job, topic, config


@pytest.mark.parametrize("read_mode", ["executors", "driver"])
def test_a_stop_that_times_out_with_kill_cancels_the_batch_and_saves_the_last_committed_one(
        spark, kafka_bootstrap, tmp_path, gated_jobs, read_mode):
    """In both read modes: with readMode=driver the batch's records were read while it was planned, and the
    restore's restart reads the cancelled batch again in a task (readBetweenOffsets)."""
    home = tmp_path / "home"
    source = {"readMode": read_mode, "maxOffsetsPerTrigger": "10"} if read_mode == "driver" else {}
    job, topic, config = held_in_batch_1(spark, kafka_bootstrap, home, gated_jobs, "life-kill",
                                         source_options=source)

    stopped = stop_job(JobHome(str(home)), timeout=2, poll=0.2, on_timeout="kill", savepoint=True).to_dict()
    assert stopped["killed"] and stopped["state"] == "STOPPED", stopped
    assert "batch 1 was cancelled" in stopped["note"], stopped
    assert stopped["savepoint"]["batch_id"] == 0 and stopped["savepoint"]["offsets"] == {topic: {"0": 3}}
    assert "batch 1 was cancelled and is not in it" in stopped["savepoint"]["note"]
    result = job.join()
    assert (result.state, result.exit_code, result.last_batch_id) == ("STOPPED", 0, 0), result.summary()
    assert sorted(job.seen) == [0, 1, 2], "batch 1 never completed"
    assert not (home / "control" / "stop").exists()
    job.gate.unlink()

    # The savepoint is fit: real Spark restored from it re-reads exactly the cancelled batch's records.
    savepoints.restore(JobHome(str(home)), stopped["savepoint"]["id"])
    seen, again = run_available_now(spark, str(home), config)
    assert again.state == "STOPPED" and seen == [3, 4], again.summary()


def test_the_stop_operator_deferred_kills_a_job_whose_drain_times_out(spark, kafka_bootstrap, tmp_path, gated_jobs,
                                                                       airflow_db):
    """Both waits deferred (dag.test runs the trigger in-process and resumes with the event alone): the kill
    phase must survive the resume, or the cancelled batch would not be named in the result and savepoint."""
    from tests.airflow_helpers import run_dag

    home = tmp_path / "home"
    job, _topic, _config = held_in_batch_1(spark, kafka_bootstrap, home, gated_jobs, "life-kill-af")

    outcome = run_dag("aks_stop_kill", f"""
from airflow.sdk import DAG
from airflow_kafka_stream.operators.stop import StreamStopOperator
with DAG("aks_stop_kill", schedule=None, catchup=False) as dag:
    StreamStopOperator(task_id="stop", job_home={str(home)!r}, savepoint=True, timeout_seconds=2,
                       on_timeout="kill", kill_timeout_seconds=60, poll_seconds=0.2, deferrable=True,
                       defer_after_seconds=0)
""")
    assert outcome.tasks == {"stop": "success"}, outcome
    stopped = outcome.xcom("stop")
    assert stopped["killed"] and stopped["state"] == "STOPPED", stopped
    assert stopped["savepoint"]["batch_id"] == 0 and "batch 1 was cancelled" in stopped["savepoint"]["note"]
    result = job.join()
    assert (result.state, result.last_batch_id) == ("STOPPED", 0), result.summary()
    job.gate.unlink()


def test_a_driver_that_cannot_write_its_heartbeat_fences_itself_before_it_looks_dead(
        spark, kafka_bootstrap, tmp_path, gated_jobs):
    topic = create_topic(kafka_bootstrap, unique("life-fence"), 1)
    home = tmp_path / "home"
    interval = 2.0
    job = GatedJob(spark, home, config_for(kafka_bootstrap, topic, heartbeat_seconds=interval))
    gated_jobs.append(job)
    produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(3)], partition=0)
    job.wait_offsets({topic: {"0": 3}})

    # status.json becomes a directory: every later write fails, as on a storage outage.
    status_file = home / "status.json"
    while True:
        last_beat = json.loads(status_file.read_text())["heartbeat_epoch"]
        os.remove(status_file)
        try:
            status_file.mkdir()
            break
        except FileExistsError:
            continue  # the heartbeat wrote it again in between
    query = job.runtime._query
    wait_for(lambda: not query.isActive, "the fenced query to stop", timeout=60)
    stopped_at = time.time()
    # Readers take a job for dead after 4 intervals (at least) without a heartbeat.
    assert stopped_at - last_beat < 4 * interval, f"the query ran {stopped_at - last_beat:.1f}s without a heartbeat"
    result = job.join()
    assert (result.state, result.exit_code) == ("FAILED", 1), result.summary()
    assert "fenced" in result.error and "status.json" in result.error


def test_a_start_is_refused_while_a_driver_beats_but_not_after_a_killed_one(spark, kafka_bootstrap, tmp_path):
    """A fresh heartbeat of a live process blocks a second driver; one left by a killed process of this host
    (a standby killed while it took the job) does not make the next start wait until it goes stale."""
    import socket
    import subprocess
    import sys

    topic = create_topic(kafka_bootstrap, unique("life-beat"), 1)
    home = tmp_path / "home"
    (home / "control").mkdir(parents=True)

    def beating(pid: int) -> None:
        """A fresh STARTING heartbeat whose driver's Python process and JVM are both ``pid`` (one process
        stands for the two: the one liveness rule calls a driver of this host dead when both are gone)."""
        now = time.time()
        (home / "status.json").write_text(json.dumps({
            "state": "STARTING", "pid": pid, "jvm_pid": pid, "host": socket.gethostname(), "heartbeat_epoch": now,
            "heartbeat": "now", "heartbeat_interval_seconds": 1.0}))

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        beating(other.pid)
        with pytest.raises(JobStateError, match=f"already runs .*pid {other.pid}"):
            StreamRuntime(spark, str(home), config_for(kafka_bootstrap, topic)).prepare()
        assert json.loads((home / "status.json").read_text())["pid"] == other.pid, "the refusal wrote nothing"
    finally:
        other.kill()
        other.wait()
    beating(other.pid)  # the same fresh heartbeat, its writer now gone
    runtime = StreamRuntime(spark, str(home), config_for(kafka_bootstrap, topic))
    try:
        runtime.prepare()
        assert read_status(str(home))["pid"] == os.getpid()
    finally:
        runtime.fail(RuntimeError("test over"))
