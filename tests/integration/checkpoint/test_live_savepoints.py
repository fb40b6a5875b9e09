"""Live savepoints of the running example pipeline (stateful ``--totals``, HDFS and RocksDB state stores).

The pipeline runs as a driver process under a continuous feed, with Spark's state maintenance made
aggressive (a pass every second, a snapshot every two deltas, two batches retained), so old state
files really are deleted while a savepoint copies. Savepoints are taken through the CLI while it runs;
then it is stopped, a live savepoint restored (``restore``) and the job run to the end of the feed: the
running totals per key equal the sums and counts of every record exactly. The same after ``reset
--to-savepoint --drop-state``, where the totals restart at the savepoint's offsets. A state file that
vanishes mid-copy makes the attempt retry; one that keeps vanishing refuses with nothing left.
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
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.savepoints import incomplete_savepoints
from airflow_kafka_stream.core.checkpoint_fsck import state_version_file
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import SavepointError
from airflow_kafka_stream.ops import savepoints
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import read_status
from tests.conftest import ROOT
from tests.integration.airflow.test_airflow_upgrade import Feeder
from tests.integration.cli_helpers import cli
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2
#: Spark's state maintenance as aggressive as it goes: deletions race every copy.
AGGRESSIVE_MAINTENANCE = ("--conf spark.sql.streaming.stateStore.maintenanceInterval=1s "
                          "--conf spark.sql.streaming.stateStore.minDeltasForSnapshot=2 "
                          "--conf spark.sql.streaming.minBatchesToRetain=2 pyspark-shell")


class Driver:
    """The example pipeline in --totals mode as a driver process."""

    def __init__(self, tmp: Path, bootstrap: str, topic: str, group: str, store: str):
        self.home, self.output, self.topic = tmp / "home", tmp / "out", topic
        self.log_path = tmp / f"driver-{time.monotonic_ns()}.log"
        env = {**os.environ, "PYSPARK_SUBMIT_ARGS": AGGRESSIVE_MAINTENANCE}
        args = [sys.executable, "-m", "airflow_kafka_stream.jobs.example_pipeline", "--home", str(self.home),
                "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--output", str(self.output),
                "--totals", "--state-store", store, "--state-partitions", "2", "--heartbeat-seconds", "3",
                "--cores", "2"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def status(self) -> dict:
        return read_status(str(self.home)) or {}

    def wait_for(self, predicate, what: str, timeout: float = 180.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := predicate():
                return value
            assert self.proc.poll() is None, f"driver exited waiting for {what}:\n{self.log_tail()}"
            time.sleep(0.3)
        pytest.fail(f"timed out waiting for {what}; status {self.status()}\n{self.log_tail()}")

    def wait_for_end(self, bootstrap: str) -> None:
        ends = {str(p): high for p, (_low, high) in watermarks(bootstrap, self.topic, PARTITIONS).items()}
        self.wait_for(lambda: (status := self.status()).get("pid") == self.proc.pid and status.get("state") == "RUNNING"
                      and status.get("last_offsets") == {self.topic: ends}, f"this driver to reach {ends}")

    def stop(self, capsys) -> None:
        stopped = cli(capsys, "stop", "--job-home", self.home, "--timeout", "120")
        assert stopped.code == 0, stopped.err + self.log_tail()
        assert self.proc.wait(60) == 0, self.log_tail()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@pytest.fixture
def drivers():
    started: list[Driver] = []
    yield started
    for driver in started:
        driver.kill()


def records(bootstrap: str, topic: str) -> list[tuple[int, int, str, float]]:
    """Every record of the topic as (partition, offset, key, amount)."""
    highs = {p: high for p, (_low, high) in watermarks(bootstrap, topic, PARTITIONS).items()}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("read"), "enable.auto.commit": False})
    found: list[tuple[int, int, str, float]] = []
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(found) < sum(highs.values()) and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None:
                    event = json.loads(message.value())
                    found.append((message.partition(), message.offset(), event["key"], float(event["amount"])))
    finally:
        consumer.close()
    assert len(found) == sum(highs.values())
    return found


def sums(rows: list[tuple[int, int, str, float]], start: dict[int, int] | None = None) -> dict[str, tuple]:
    """(amount, count) per key of the records at or after ``start`` (per partition)."""
    totals: dict[str, tuple[float, int]] = {}
    for partition, offset, key, amount in rows:
        if start is None or offset >= start[partition]:
            before = totals.get(key, (0.0, 0))
            totals[key] = (before[0] + amount, before[1] + 1)
    return totals


def totals(output: Path, generation: int | None = None) -> dict[str, tuple]:
    """The newest (amount, events) per key the job wrote (in one generation, or over all of them)."""
    rows = ds.dataset(str(output / "totals"), format="parquet", partitioning="hive").to_table().to_pylist()
    newest: dict[str, dict] = {}
    for row in rows:
        if generation is not None and int(row["generation"]) != generation:
            continue
        seen = newest.get(row["key"])
        if seen is None or (int(row["generation"]), int(row["batch"])) > (int(seen["generation"]), int(seen["batch"])):
            newest[row["key"]] = row
    return {key: (row["amount"], row["events"]) for key, row in newest.items()}


def offsets_of(savepoint: dict, topic: str) -> dict[int, int]:
    return {int(p): o for p, o in savepoint["offsets"][topic].items()}


def assert_only_its_batch(savepoint: dict, home: Path) -> None:
    """A live savepoint holds nothing of a batch after its own: no later offsets, no later state version."""
    manifest = json.loads((home / "savepoints" / savepoint["id"] / "manifest.json").read_text())
    batch = manifest["batch_id"]
    assert manifest["live"] is True
    for path in manifest["files"]:
        name = path.rsplit("/", 1)[-1]
        if path.startswith(("offsets/", "commits/")):
            assert int(name) in (batch - 1, batch), path
        elif (parsed := state_version_file(name)) is not None:
            assert parsed[0] <= batch + 1, path


def vanishing(home: Path, every_attempt: bool):
    """A step hook that hides the first state file an attempt copied (as Spark's maintenance deleting it
    would) and puts it back once the attempt failed, so the running job keeps every file."""
    hidden: dict[str, Path] = {}
    steps: list[str] = []

    def hook(step: str) -> None:
        steps.append(step)
        if step.startswith("copy:state/") and not hidden and (every_attempt or "failed:1" not in steps):
            path = JobHome(str(home)).checkpoint_url() + "/" + step[len("copy:"):]
            hidden[path] = Path(path).rename(Path(path).with_name(".hidden-by-test"))
        elif step.startswith("failed:") and hidden:
            for original, moved in hidden.items():
                moved.rename(original)
            hidden.clear()

    return hook, steps


@pytest.mark.parametrize("store", ["hdfs", "rocksdb"])
def test_live_savepoints_restore_and_reset_exactly(store, kafka_bootstrap, tmp_path, capsys, drivers):
    topic = create_topic(kafka_bootstrap, unique(f"live-sp-{store}"), PARTITIONS)
    group = unique("live-sp")
    feeder = Feeder(kafka_bootstrap, topic, interval=0.5)
    feeder.start()
    try:
        run = Driver(tmp_path, kafka_bootstrap, topic, group, store)
        drivers.append(run)
        home = run.home
        run.wait_for(lambda: run.status().get("state") == "RUNNING" and (run.status().get("last_batch_id") or 0) >= 3,
                      "three committed batches")
        made = []
        for _ in range(3):
            created = cli(capsys, "savepoint", "create", "--job-home", home, "--json")
            assert created.code == 0, created.err
            made.append(created.json())
            assert made[-1]["live"] is True and made[-1]["stateful"] is True
            assert_only_its_batch(made[-1], home)
            time.sleep(1.0)
        text = cli(capsys, "savepoint", "list", "--job-home", home)
        assert all(m["id"] in text.out for m in made) and " live " in text.out
        shown = cli(capsys, "savepoint", "show", made[0]["id"], "--job-home", home, "--json").json()
        assert shown["live"] is True

        # A state file that vanishes mid-copy: the attempt fails, its copy is removed, the next one succeeds.
        hook, steps = vanishing(home, every_attempt=False)
        retried = savepoints.create(JobHome(str(home)), step_hook=hook)
        assert "failed:1" in steps and steps[-1] == "manifest" and retried.live
        # ... and one that vanishes at every attempt is refused: nothing is left, the list is unchanged.
        before = [m.id for m in savepoints.list_all(JobHome(str(home)))]
        hook, steps = vanishing(home, every_attempt=True)
        with pytest.raises(SavepointError, match="raced Spark's state maintenance"):
            savepoints.create(JobHome(str(home)), step_hook=hook)
        assert [m.id for m in savepoints.list_all(JobHome(str(home)))] == before
        assert incomplete_savepoints(str(home / "savepoints")) == []
        assert JobHome(str(home)).history()[-1]["result"] == "refused"

        # Another operation holds the lock: refused at once, nothing written.
        with JobHome(str(home)).lock("restore", holder="bob@elsewhere:1"):
            locked = cli(capsys, "savepoint", "create", "--job-home", home)
        assert locked.code == 2 and "locked by bob@elsewhere:1" in locked.err
        assert [m.id for m in savepoints.list_all(JobHome(str(home)))] == before

        # The job ran on throughout.
        last = max(m["batch_id"] for m in made)
        run.wait_for(lambda: (run.status().get("last_batch_id") or 0) > last + 1, "batches after the savepoints")
        assert run.status()["state"] == "RUNNING"
    finally:
        feeder.stop()
    run.wait_for_end(kafka_bootstrap)
    run.stop(capsys)
    everything = records(kafka_bootstrap, topic)
    assert totals(run.output) == sums(everything)

    # Restore a live savepoint and run to the end: every key's totals are exact.
    chosen = made[1]
    restored = cli(capsys, "restore", "--job-home", home, "--savepoint", chosen["id"], "--json")
    assert restored.code == 0, restored.err
    generation = restored.json()["generation"]
    position = read_position(JobHome(str(home)).checkpoint_url())
    assert position.batch_id == chosen["batch_id"] and position.in_flight_batch_id is None
    assert position.source_offsets(0) == {TopicPartition(topic, p): o for p, o in offsets_of(chosen, topic).items()}
    fsck = cli(capsys, "checkpoint", "fsck", "--job-home", home)
    assert fsck.code == 0, fsck.out + fsck.err
    again = Driver(tmp_path, kafka_bootstrap, topic, group, store)
    drivers.append(again)
    again.wait_for_end(kafka_bootstrap)
    again.stop(capsys)
    first = min(int(p.name.split("=")[1]) for p in (run.output / "totals" / f"generation={generation:04d}").iterdir())
    assert first == chosen["batch_id"] + 1, "the restored checkpoint resumes right after the savepoint's batch"
    assert totals(run.output) == sums(everything), "nothing lost, nothing counted twice"

    # Reset to another live savepoint, dropping state: the totals start again at its offsets.
    target = made[2]
    reset = cli(capsys, "reset", "--job-home", home, "--to-savepoint", target["id"], "--drop-state", "--execute",
                "--json")
    assert reset.code == 0, reset.out + reset.err
    generation = JobHome(str(home)).current_generation()
    third = Driver(tmp_path, kafka_bootstrap, topic, group, store)
    drivers.append(third)
    third.wait_for_end(kafka_bootstrap)
    third.stop(capsys)
    assert totals(run.output, generation) == sums(everything, offsets_of(target, topic))
