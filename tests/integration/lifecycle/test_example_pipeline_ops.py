"""The example pipeline, run as users run it, through every operation on its job home.

One job home, one 8-partition topic, one story (the steps depend on each
other, so it is one test): a running driver is stopped with a savepoint;
checkpoint, fsck, verify and the savepoint commands look at it; a restore with
state and a restart lose and duplicate nothing; then every reset strategy is
planned (dry run, which changes nothing) and executed, scoped to different
partitions (eight of them) so that one ``--available-now`` restart checks up to
seven strategies;
each restart must read exactly from the targets to the end, as the parquet the
pipeline writes under ``<output>/events/generation=G/batch=B`` shows, and
leave the output of earlier batches untouched; finally a restore that drops
state. The consumer group is checked against the checkpoint after each step.

The pipeline's sink is idempotent per batch id (no ``_spark_metadata``): that
it records so in job.json is what lets a reset without ``--drop-state`` run at
all on its home.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from tests.conftest import ROOT
from tests.integration.cli_helpers import Job, assert_unchanged, cli, commit_group, file_tree, output_args, snapshot
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

PARTS = 8


class Example:
    """The example pipeline's job home, output and driver runs."""

    def __init__(self, tmp: Path, bootstrap: str, topic: str, group: str):
        self.tmp, self.bootstrap, self.topic, self.group = tmp, bootstrap, topic, group
        self.home, self.output = tmp / "home", tmp / "out"
        self.job = Job(self.home, bootstrap, group, {topic: PARTS})
        self.runs = 0

    def start(self, *extra: str) -> tuple[subprocess.Popen, Path]:
        self.runs += 1
        log_path = self.tmp / f"driver-{self.runs}.log"
        args = [sys.executable, "-m", "airflow_kafka_stream.jobs.example_pipeline", "--home", str(self.home),
                "--bootstrap", self.bootstrap, "--topic", self.topic, "--group", self.group,
                *output_args(self.output, extra), "--heartbeat-seconds", "3", "--cores", "2", *extra]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return proc, log_path

    def run_available_now(self) -> dict[tuple[int, int], list[tuple[str, int, int]]]:
        """One restart that reads what is there and stops; the rows of each batch it wrote, by (gen, batch)."""
        before_keys, before_files = self.batches(), file_tree(self.output / "events")
        proc, log_path = self.start("--available-now")
        try:
            code = proc.wait(600)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"available-now run did not finish:\n{log_path.read_text()[-4000:]}")
        assert code == 0, log_path.read_text()[-4000:]
        # Idempotent per batch: a restart never rewrites what an earlier batch wrote.
        after_files = file_tree(self.output / "events")
        assert {k: v for k, v in after_files.items() if k in before_files} == before_files
        return {key: self.rows(key) for key in sorted(self.batches() - before_keys)}

    def batches(self) -> set[tuple[int, int]]:
        root = self.output / "events"
        if not root.exists():
            return set()
        return {(int(g.name.split("=")[1]), int(b.name.split("=")[1]))
                for g in root.iterdir() if g.name.startswith("generation=")
                for b in g.iterdir() if b.name.startswith("batch=")}

    def rows(self, key: tuple[int, int]) -> list[tuple[str, int, int]]:
        path = self.output / "events" / f"generation={key[0]:04d}" / f"batch={key[1]}"
        table = ds.dataset(str(path), format="parquet").to_table(columns=["topic", "partition", "offset"])
        return list(zip(*(table.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True))

    def ids(self) -> list[str]:
        return ds.dataset(str(self.output / "events"), format="parquet", partitioning="hive").to_table(
            columns=["id"]).column("id").to_pylist()

    def tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def at(self, *offsets: int) -> dict[TopicPartition, int]:
        return {self.tp(p): off for p, off in enumerate(offsets)}

    def assert_in_sync(self, *offsets: int) -> None:
        """Checkpoint and group both at ``offsets`` (one per partition)."""
        assert self.job.position() == self.at(*offsets)
        assert self.job.group_offsets() == self.at(*offsets)


def produce_wave(ex: Example, first_id: int, per_partition: int) -> int:
    """``per_partition`` events to every partition."""
    n = first_id
    for partition in range(PARTS):
        records = []
        for _ in range(per_partition):
            records.append((f"k{n % 3}", json.dumps({"id": f"e{n}", "key": f"k{n % 3}",
                                                      "ts": "2026-01-01T00:00:00Z", "amount": n})))
            n += 1
        produce(ex.bootstrap, ex.topic, records, partition=partition)
    return n


def reads(batches: dict, topic: str) -> dict[int, list[int]]:
    """Offsets read per partition over all ``batches`` (sorted; a duplicate would show twice)."""
    got: dict[int, list[int]] = {}
    for rows in batches.values():
        for row_topic, partition, offset in rows:
            assert row_topic == topic
            got.setdefault(partition, []).append(offset)
    return {p: sorted(v) for p, v in got.items()}


def expect(**ranges: range) -> dict[int, list[int]]:
    return {int(p[1:]): list(r) for p, r in ranges.items() if len(r)}


def reset(capsys, ex: Example, *strategy: str, expected: dict[int, int]) -> dict:
    """Dry run (changes nothing, plans ``expected``), then execute (verified, group in sync); the outcome."""
    home = ("--job-home", str(ex.home))
    before = snapshot(ex.job)
    planned = cli(capsys, "reset", *home, *strategy, "--json")
    assert planned.code == 0, planned.err
    targets = {r["partition"]: r["target"] for r in planned.json()["partitions"] if r["in_scope"]}
    assert targets == expected, strategy
    assert_unchanged(ex.job, before)
    done = cli(capsys, "reset", *home, *strategy, "--execute", "--json")
    assert done.code == 0, done.err
    outcome = done.json()
    assert outcome["verified"] is True, outcome["verification"]
    assert "idempotent sink" in outcome["sink"] and "no batch log" in outcome["sink"]
    position = ex.job.position()
    assert {tp.partition: off for tp, off in position.items() if tp.partition in expected} == expected
    assert ex.job.group_offsets() == position
    return outcome


# Five driver starts: about 2 minutes on an idle 2-core machine, several times that when the cores are shared.
@pytest.mark.timeout(1800)
def test_example_pipeline_through_every_operation(kafka_bootstrap, tmp_path, capsys):
    topic = create_topic(kafka_bootstrap, unique("example-ops"), PARTS)
    ex = Example(tmp_path, kafka_bootstrap, topic, unique("example-ops-group"))
    home = ("--job-home", str(ex.home))

    # -- a running driver, stopped with a savepoint ---------------------------------------------------------------
    next_id = produce_wave(ex, 0, 6)  # offsets 0..5 in every partition
    wave1_end = time.time()
    driver, log_path = ex.start("--trigger-interval", "1 second")
    try:
        def wait_for(end: int) -> None:
            deadline = time.monotonic() + 400
            while (ex.job.jobhome.status() or {}).get("last_offsets") != {topic: {str(p): end for p in range(PARTS)}}:
                assert driver.poll() is None and time.monotonic() < deadline, log_path.read_text()[-4000:]
                time.sleep(0.3)

        wait_for(6)
        time.sleep(max(0.0, wave1_end + 0.05 - time.time()))  # Kafka finds offsets for times to the millisecond
        wave2_start = time.time()
        mark = (wave1_end + wave2_start) / 2
        next_id = produce_wave(ex, next_id, 6)  # offsets 6..11, read by the running driver
        wait_for(12)
        stopped = cli(capsys, "stop", *home, "--savepoint", "--timeout", "400", "--json")
        assert stopped.code == 0, stopped.err + log_path.read_text()[-4000:]
        assert driver.wait(120) == 0, log_path.read_text()[-4000:]
    finally:
        if driver.poll() is None:
            driver.kill()
    result = stopped.json()
    assert result["was_running"] and result["offsets"] == {topic: {str(p): 12 for p in range(PARTS)}}
    savepoint = result["savepoint"]["id"]
    assert result["savepoint"]["offsets"] == {topic: {str(p): 12 for p in range(PARTS)}}
    assert sorted(ex.ids()) == sorted(f"e{i}" for i in range(12 * PARTS))
    assert json.loads((ex.home / "job.json").read_text())["sink"] == {"kind": "idempotent", "path": str(ex.output)}

    # -- looking at it: checkpoint, fsck, verify, savepoints ------------------------------------------------------
    position = cli(capsys, "checkpoint", *home, "--json")
    assert position.code == 0 and position.json()["offsets"] == {topic: {str(p): 12 for p in range(PARTS)}}
    assert position.json()["batch_id"] == result["savepoint"]["batch_id"]
    fsck = cli(capsys, "checkpoint", "fsck", *home)
    assert fsck.code == 0, fsck.out + fsck.err
    verified = cli(capsys, "verify", *home)
    assert verified.code == 0, verified.out + verified.err
    listed = cli(capsys, "savepoint", "list", *home, "--json")
    assert [s["id"] for s in listed.json()] == [savepoint]
    shown = cli(capsys, "savepoint", "show", savepoint, *home, "--json")
    assert shown.json()["offsets"] == {topic: {str(p): 12 for p in range(PARTS)}}
    valid = cli(capsys, "savepoint", "validate", savepoint, *home)
    assert valid.code == 0 and "checksums match" in valid.out

    # -- restore with state, restart: nothing lost, nothing duplicated over stop/savepoint/restore ----------------
    restored = cli(capsys, "restore", *home, "--savepoint", savepoint, "--json")
    assert restored.code == 0, restored.err
    assert restored.json()["generation"] == 2 and "idempotent sink" in restored.json()["sink"]
    next_id = produce_wave(ex, next_id, 2)  # offsets 12..13
    batches = ex.run_available_now()
    assert {gen for gen, _ in batches} == {2}
    assert min(b for _, b in batches) == result["savepoint"]["batch_id"] + 1
    assert reads(batches, topic) == {p: [12, 13] for p in range(PARTS)}
    assert sorted(ex.ids()) == sorted(f"e{i}" for i in range(next_id)), "lost or duplicated across the cycle"
    ex.assert_in_sync(*[14] * PARTS)

    # -- the sink kind: an override to a file sink is refused (no _spark_metadata), an empty path too -------------
    before = snapshot(ex.job)
    as_file = cli(capsys, "reset", *home, "--to-earliest", "--sink-kind", "file", "--execute")
    assert (as_file.code == 2 and "_spark_metadata" in as_file.err and "set sink_kind to idempotent" in as_file.err
            and "[sink_kind: --sink-kind; sink_path: --sink-path]" in as_file.err)  # either way out, with its flag
    empty = cli(capsys, "reset", *home, "--to-earliest", "--sink-path", "", "--execute")
    assert empty.code == 2 and "sink_path is empty" in empty.err and "[sink_path: --sink-path]" in empty.err
    assert_unchanged(ex.job, before)

    # -- round 1: to-offset (one offset, and per partition), shift-by, to-earliest on partitions 0-3; to-datetime,
    #    by-duration, to-latest (past records it never read) on partitions 4-7 ---------------------------------------
    produce(ex.bootstrap, topic, [("k", json.dumps({"id": f"e{next_id + i}"})) for i in range(3)], partition=7)
    when = datetime.fromtimestamp(mark, UTC).isoformat()
    appended = [
        reset(capsys, ex, "--to-offset", "3", "--topic", f"{topic}:0", expected={0: 3})["batch_id"],
        reset(capsys, ex, "--to-offset", f"{topic}:1=5", "--topic", f"{topic}:1", expected={1: 5})["batch_id"],
        reset(capsys, ex, "--shift-by", "-4", "--topic", f"{topic}:2", expected={2: 10})["batch_id"],
        reset(capsys, ex, "--to-earliest", "--topic", f"{topic}:3", expected={3: 0})["batch_id"],
        reset(capsys, ex, "--to-datetime", when, "--topic", f"{topic}:4,5", expected={4: 6, 5: 6})["batch_id"],
        reset(capsys, ex, "--by-duration", f"PT{time.time() - mark:.3f}S", "--topic", f"{topic}:6",
              expected={6: 6})["batch_id"],
        reset(capsys, ex, "--to-latest", "--topic", f"{topic}:7", expected={7: 17})["batch_id"],
    ]
    batches = ex.run_available_now()
    assert not {(2, b) for b in appended} & set(batches), "an appended batch must not run (its offsets are done)"
    assert min(b for _, b in batches) > max(appended)
    assert reads(batches, topic) == expect(p0=range(3, 14), p1=range(5, 14), p2=range(10, 14), p3=range(0, 14),
                                           p4=range(6, 14), p5=range(6, 14), p6=range(6, 14))
    ex.assert_in_sync(*[14] * 7, 17)

    # -- round 3: to-current realigns a group that drifted; to-savepoint; from-file (an --export) -----------------
    commit_group(ex.bootstrap, ex.group, ex.at(*[0] * PARTS))
    assert cli(capsys, "verify", *home).code == 1
    reset(capsys, ex, "--to-current", expected={**{p: 14 for p in range(7)}, 7: 17})
    assert cli(capsys, "verify", *home).code == 0
    reset(capsys, ex, "--to-savepoint", savepoint, expected={p: 12 for p in range(PARTS)})
    exported = tmp_path / "plan.csv"
    dry = cli(capsys, "reset", *home, "--shift-by", "-5", "--topic", f"{topic}:0,1", "--export", str(exported))
    assert dry.code == 0 and "nothing changed" in dry.out
    reset(capsys, ex, "--from-file", str(exported), "--topic", f"{topic}:0,1", expected={0: 7, 1: 7})
    batches = ex.run_available_now()
    assert reads(batches, topic) == {0: list(range(7, 14)), 1: list(range(7, 14)),
                                     **{p: [12, 13] for p in range(2, 7)}, 7: list(range(12, 17))}
    ex.assert_in_sync(*[14] * 7, 17)

    # -- restore dropping state: a fresh generation at the savepoint's offsets, batch ids from 0 -------------------
    dropped = cli(capsys, "restore", *home, "--savepoint", savepoint, "--drop-state", "--json")
    assert dropped.code == 0, dropped.err
    assert dropped.json()["generation"] == 3
    batches = ex.run_available_now()
    assert {gen for gen, _ in batches} == {3} and min(b for _, b in batches) == 0
    assert reads(batches, topic) == {**{p: [12, 13] for p in range(7)}, 7: list(range(12, 17))}
    ex.assert_in_sync(*[14] * 7, 17)
    assert cli(capsys, "verify", *home).code == 0
    assert cli(capsys, "checkpoint", "fsck", *home).code == 0
