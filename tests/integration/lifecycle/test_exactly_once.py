"""The example pipeline, run as a real driver process, delivers every record exactly once.

Each test starts the pipeline as a subprocess (so it can be stopped with a
control file, SIGTERM or ``kill -9``) against the real broker, and reads what it
wrote: the parquet sink, the dead letters, the checkpoint, the status file and
the consumer group's committed offsets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.processes import process_alive
from airflow_kafka_stream.storage.status import is_alive, read_status
from tests.conftest import ROOT
from tests.integration.cli_helpers import cli_subprocess, output_args
from tests.kafka_utils import committed, create_topic, produce, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2


def events(start: int, count: int) -> list[tuple[str, str]]:
    return [(f"k{i % 5}", json.dumps({"id": f"e{i}", "key": f"k{i % 5}", "ts": f"2024-01-01T00:{i % 60:02d}:00Z",
                                      "amount": i}))
            for i in range(start, start + count)]


class Pipeline:
    """One run of the example pipeline (or ``app``, a script taking its arguments) as a separate driver process."""

    def __init__(self, tmp: Path, bootstrap: str, topic: str, group: str, *extra: str,
                 home_url: str | None = None, env: dict[str, str] | None = None, app: Path | None = None):
        self.home, self.output = tmp / "home", tmp / "out"
        self.log_path = tmp / f"driver-{time.monotonic_ns()}.log"
        program = [str(app)] if app else ["-m", "airflow_kafka_stream.jobs.example_pipeline"]
        args = [sys.executable, *program, "--home", home_url or str(self.home),
                "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                *output_args(self.output, extra), "--heartbeat-seconds", "2", "--cores", "2", *extra]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def status(self) -> dict:
        return read_status(str(self.home)) or {}

    def wait_for(self, predicate, what: str, timeout: float = 120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            if self.proc.poll() is not None:
                pytest.fail(f"driver exited with {self.proc.returncode} while waiting for {what}:\n{self.log_tail()}")
            time.sleep(0.3)
        pytest.fail(f"timed out waiting for {what}; status {self.status()}\n{self.log_tail()}")

    def wait_for_offsets(self, topic: str, ends: dict[int, int], timeout: float = 120.0):
        wanted = {topic: {str(p): end for p, end in ends.items()}}
        self.wait_for(lambda: self.status().get("last_offsets") == wanted, f"the job to reach {wanted}", timeout)

    def request_stop(self) -> None:
        (self.home / "control").mkdir(parents=True, exist_ok=True)
        (self.home / "control" / "stop").write_text(json.dumps({"requested_at": "test", "by": "test"}))

    def wait_exit(self, timeout: float = 120.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"driver did not exit within {timeout}s:\n{self.log_tail()}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


@pytest.fixture
def pipelines():
    started: list[Pipeline] = []
    yield started
    for pipeline in started:
        pipeline.kill()


def sink_rows(output: Path) -> list[dict]:
    dataset = ds.dataset(str(output / "events"), format="parquet", partitioning="hive")
    return dataset.to_table().to_pylist()


def dead_letters(home: Path) -> list[dict]:
    path = home / "dead_letters"
    if not path.exists():
        return []
    return ds.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pylist()


def checkpoint_positions(home: Path) -> dict[int, dict]:
    """Offsets of every committed batch of the current checkpoint generation, by batch id."""
    checkpoint = sorted((home / "checkpoints").iterdir())[-1]
    commits = {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    positions = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit() and int(path.name) in commits:
            lines = path.read_text().splitlines()
            positions[int(path.name)] = json.loads(lines[2])
    return positions


def group_offsets(bootstrap: str, group: str, topic: str) -> dict:
    return {topic: {str(p): o for p, o in committed(bootstrap, group, topic, PARTITIONS).items()}}


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: high for p, (_low, high) in watermarks(bootstrap, topic, PARTITIONS).items()}


def assert_exactly_once(rows: list[dict], expected_ids: set[str]) -> None:
    ids = [row["id"] for row in rows]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"records written more than once: {duplicates[:10]}"
    assert set(ids) == expected_ids, f"missing {sorted(expected_ids - set(ids))[:10]}"
    positions = [(row["topic"], row["partition"], row["offset"]) for row in rows]
    assert len(positions) == len(set(positions))


def test_graceful_stop_restart_poison_pills_status_and_group_commits(kafka_bootstrap, tmp_path, pipelines):
    topic = create_topic(kafka_bootstrap, unique("eo-graceful"), PARTITIONS)
    group = unique("eo-group")
    produce(kafka_bootstrap, topic, events(0, 60))
    produce(kafka_bootstrap, topic, [("pill", "this is not json")], partition=0)
    produce(kafka_bootstrap, topic, events(60, 20))

    run = Pipeline(tmp_path, kafka_bootstrap, topic, group, "--max-offsets-per-trigger", "20")
    pipelines.append(run)
    run.wait_for_offsets(topic, end_offsets(kafka_bootstrap, topic))

    # Status fields are there and the heartbeat advances while nothing happens.
    first = run.status()
    for name in ("job", "state", "application_id", "query_id", "run_id", "checkpoint", "last_batch_id",
                 "last_offsets", "heartbeat", "heartbeat_epoch", "pid", "host", "group_commits", "dead_letters",
                 "started_at"):
        assert name in first, name
    assert first["state"] == "RUNNING" and first["pid"] == run.proc.pid
    assert first["application_id"].startswith("local-")
    assert is_alive(first, time.time(), max_age_seconds=10)
    run.wait_for(lambda: run.status()["heartbeat_epoch"] > first["heartbeat_epoch"] + 0.5, "a newer heartbeat")

    # The poison pill went aside, the job kept running, and later good records still arrive.
    run.wait_for(lambda: run.status()["dead_letters"] == 1, "the poison pill to be counted")
    produce(kafka_bootstrap, topic, [("pill", '{"id": null, "amount": "lots"}')], partition=1)
    produce(kafka_bootstrap, topic, events(80, 30))
    run.wait_for_offsets(topic, end_offsets(kafka_bootstrap, topic))
    assert run.status()["state"] == "RUNNING"
    # What an operator at a terminal sees: it runs (exit 0), two records went to the dead letters.
    shown = cli_subprocess("status", "--job-home", run.home)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "RUNNING (running)" in shown.stdout and "dead letters    2" in shown.stdout, shown.stdout

    # Group commits follow the checkpoint: after the last batch they are equal, never ahead or +1.
    positions = checkpoint_positions(run.home)
    last = max(positions)
    run.wait_for(lambda: group_offsets(kafka_bootstrap, group, topic) == positions[last],
                 f"group offsets to equal batch {last}'s checkpoint offsets")
    assert len(positions) >= 4, "maxOffsetsPerTrigger should have split the input into several batches"

    run.request_stop()
    assert run.wait_exit() == 0, run.log_tail()
    stopped = run.status()
    assert stopped["state"] == "STOPPED" and stopped["stopped_at"]
    assert stopped["last_batch_id"] == max(checkpoint_positions(run.home))
    assert not (run.home / "control" / "stop").exists()
    assert not (run.home / "control" / "drained.json").exists()
    assert "example_pipeline STOPPED" in run.log_tail()
    shown = cli_subprocess("status", "--job-home", run.home, "--json")
    assert shown.returncode == 1 and json.loads(shown.stdout)["state"] == "STOPPED", shown.stdout + shown.stderr

    # Records produced while stopped are read by the next run from where the first one stopped.
    produce(kafka_bootstrap, topic, events(110, 40))
    again = Pipeline(tmp_path, kafka_bootstrap, topic, group, "--max-offsets-per-trigger", "25")
    pipelines.append(again)
    ends = end_offsets(kafka_bootstrap, topic)
    again.wait_for_offsets(topic, ends)
    os.kill(again.proc.pid, signal.SIGTERM)
    assert again.wait_exit() == 0, again.log_tail()
    assert again.status()["state"] == "STOPPED"
    assert again.status()["stop_requested_by"] == "SIGTERM"

    assert_exactly_once(sink_rows(run.output), {f"e{i}" for i in range(150)})
    letters = dead_letters(run.home)
    assert sorted(r["value"] for r in letters) == sorted([b'{"id": null, "amount": "lots"}', b"this is not json"])
    assert {r["topic"] for r in letters} == {topic}
    assert all(r["error"] and r["offset"] >= 0 and r["partition"] in (0, 1) for r in letters)
    final = checkpoint_positions(run.home)
    wanted = {topic: {str(p): end for p, end in ends.items()}}
    assert final[max(final)] == wanted
    assert group_offsets(kafka_bootstrap, group, topic) == wanted


@pytest.mark.parametrize("read_mode", ["executors", "auto"])
def test_kill_minus_9_mid_stream_then_restart_is_exactly_once(kafka_bootstrap, tmp_path, pipelines, read_mode):
    """The restart runs the batch the killed driver planned again (with readMode=auto, the default, whose
    small batches are read on the driver: in a task, since the new driver never read it) and goes on."""
    topic = create_topic(kafka_bootstrap, unique("eo-kill"), PARTITIONS)
    group = unique("eo-group")
    produce(kafka_bootstrap, topic, events(0, 400))
    total = set(f"e{i}" for i in range(400))

    run = Pipeline(tmp_path, kafka_bootstrap, topic, group, "--max-offsets-per-trigger", "10", "--read-mode", read_mode)
    pipelines.append(run)
    run.wait_for(lambda: (run.status().get("last_batch_id") or -1) >= 3, "a few batches")
    run.kill()  # the whole process group: Python driver and its JVM, no shutdown hooks
    crashed = run.status()
    assert crashed["state"] in ("RUNNING", "STARTING")
    assert crashed["read_placement"]["mode"] == read_mode, "the status says where batches are read"
    assert crashed["read_placement"]["reason"].startswith(f"readMode={read_mode}")
    # Its heartbeat is still fresh, but both of its processes are gone on this host: an operation need not wait
    # the heartbeat out (the driver recorded its JVM's pid beside its own).
    assert crashed["jvm_pid"] not in (None, crashed["pid"])
    # SIGKILL reached the whole group; a JVM with a large heap can take a moment more than its Python parent to go.
    deadline = time.monotonic() + 10
    while process_alive(crashed["jvm_pid"], crashed["host"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert is_alive(crashed, time.time(), max_age_seconds=30)
    assert job_is_running(JobHome(str(run.home))) == (False, crashed)
    shown = cli_subprocess("status", "--job-home", run.home)
    assert shown.returncode == 1 and "DEAD (its last status says RUNNING" in shown.stdout and "the driver is gone" in shown.stdout, shown.stdout + shown.stderr
    assert not is_alive(crashed, time.time() + 60, max_age_seconds=10), "a dead driver must look dead once stale"
    assert len(set(row["id"] for row in sink_rows(run.output))) < len(total), "killed too late to prove anything"

    again = Pipeline(tmp_path, kafka_bootstrap, topic, group, "--max-offsets-per-trigger", "200",
                     "--read-mode", read_mode)
    pipelines.append(again)
    again.wait_for_offsets(topic, end_offsets(kafka_bootstrap, topic))
    again.request_stop()
    assert again.wait_exit() == 0, again.log_tail()
    assert_exactly_once(sink_rows(run.output), total)
    # The job page's lag plot: from the progress, or (batches read on the driver, whose progress has no
    # latest offsets) from Kafka's watermarks after a batch.
    samples = again.status()["lag_samples"]
    assert samples and all(0 <= waiting <= len(total) for _at, _batch, waiting in samples), samples
    final = checkpoint_positions(run.home)
    assert group_offsets(kafka_bootstrap, group, topic) == final[max(final)]
