"""Savepoints stream their files: bounded memory whatever the state's size, one read per file.

Create, validate and restore succeed in a process whose memory is capped below the size of one state
file (reading a file whole, as they once did, fails there with MemoryError). The checkpoint is a real
HDFS-state checkpoint written by Spark; one file of its state directory is made larger than the cap.
Spark ignores that file (its name carries no version), so the restored checkpoint is proved fit by
restarting the stateful query on it, and the large file is compared byte for byte.

A restore reads each savepoint file once, checking it against the manifest as it copies it (it used
to read everything three times while holding the job lock), and still refuses a damaged savepoint
with nothing changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.conftest import ROOT
from tests.integration.cli_helpers import (
    CONSOLE_SCRIPT,
    Job,
    assert_unchanged,
    cli,
    snapshot,
    source_frame,
    starting_offsets,
    write_job_json,
)
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
#: The data segment the CLI process may use: what a small control-plane container might give it.
MEMORY_CAP = 192 * MIB
#: One state file, larger than the cap (a RocksDB SST of a real job can be gigabytes).
LARGE_FILE = 256 * MIB
LARGE_NAME = "large-state-blob"  # no ".<version>.delta/snapshot": the HDFS state store ignores it


def capped(*argv: str, timeout: float = 300.0) -> tuple[subprocess.CompletedProcess, float]:
    """Run the console script with its data segment (heap and anonymous memory) capped at MEMORY_CAP."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))

    started = time.monotonic()
    done = subprocess.run([CONSOLE_SCRIPT, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=cap)
    return done, time.monotonic() - started


def counts(spark, job: Job) -> dict[int, int]:
    """Run a streaming count per partition (HDFS state store) once; the counts of its last batch."""
    got: dict[int, int] = {}

    def keep(df, _batch):
        got.update({r["partition"]: r["count"] for r in df.collect()})

    query = (source_frame(spark, job, starting_offsets(job)).groupBy("partition").count().writeStream
             .option("checkpointLocation", job.checkpoint).outputMode("complete").foreachBatch(keep)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    return got


def write_large(path: Path) -> str:
    """A file of LARGE_FILE bytes (written for real, not sparse); its sha256."""
    block = os.urandom(MIB)
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for index in range(LARGE_FILE // MIB):
            chunk = index.to_bytes(8, "big") + block[8:]  # every MiB differs, so a misplaced chunk shows
            out.write(chunk)
            digest.update(chunk)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(4 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def stateful_job(spark, bootstrap: str, home: Path) -> Job:
    """A job home whose checkpoint holds a streaming count per partition (HDFS state), 6 records each."""
    topic = create_topic(bootstrap, unique("sp-stream"), partitions=2)
    for p in (0, 1):
        produce(bootstrap, topic, [(None, "x") for _ in range(6)], partition=p)
    group = unique("sp-stream")
    write_job_json(home, bootstrap, group, [topic])
    job = Job(home, bootstrap, group, {topic: 2})
    JobHome(str(home)).new_generation("submit", start_offsets="earliest")
    assert counts(spark, job) == {0: 6, 1: 6}
    return job


def produce_more(job: Job) -> None:
    for topic, partitions in job.topics.items():
        for p in range(partitions):
            produce(job.bootstrap, topic, [(None, "y") for _ in range(4)], partition=p)


def test_savepoint_of_a_state_larger_than_memory(spark, kafka_bootstrap, tmp_path):
    home = tmp_path / "home"
    job = stateful_job(spark, kafka_bootstrap, home)
    large = Path(job.checkpoint.removeprefix("file://")) / "state" / "0" / "0" / LARGE_NAME
    expected = write_large(large)

    made, create_seconds = capped("savepoint", "create", "--job-home", home, "--app-version", "2.0", "--json")
    assert made.returncode == 0, made.stderr
    savepoint_id = json.loads(made.stdout)["id"]
    copy = home / "savepoints" / savepoint_id / "state" / "0" / "0" / LARGE_NAME
    assert sha256_of(copy) == expected

    checked, validate_seconds = capped("savepoint", "validate", savepoint_id, "--job-home", home)
    assert checked.returncode == 0, checked.stderr
    assert "checksums match" in checked.stdout

    produce_more(job)
    assert counts(spark, job) == {0: 10, 1: 10}
    restored, restore_seconds = capped("restore", "--job-home", home, "--savepoint", savepoint_id)
    assert restored.returncode == 0, restored.stderr
    restored_large = Path(job.checkpoint.removeprefix("file://")) / "state" / "0" / "0" / LARGE_NAME
    assert restored_large != large and sha256_of(restored_large) == expected
    assert counts(spark, job) == {0: 10, 1: 10}, "state 6 from the savepoint + the 4 records after it"
    print(f"\nwith {LARGE_FILE // MIB} MiB in one state file: create {create_seconds:.1f}s, "
          f"validate {validate_seconds:.1f}s, restore (job lock held) {restore_seconds:.1f}s")


def create(capsys, job: Job) -> tuple[str, dict[str, str]]:
    """Take a savepoint through the CLI; its id and its manifest's files (relative path -> sha256)."""
    made = cli(capsys, "savepoint", "create", "--job-home", job.home, "--app-version", "2.0", "--json")
    assert made.code == 0, made.err
    savepoint_id = made.json()["id"]
    manifest = json.loads((job.home / "savepoints" / savepoint_id / "manifest.json").read_text())
    return savepoint_id, manifest["files"]


def test_restore_reads_each_savepoint_file_once(capsys, spark, kafka_bootstrap, tmp_path, monkeypatch):
    job = stateful_job(spark, kafka_bootstrap, tmp_path / "home")
    savepoint_id, files = create(capsys, job)
    assert any(name.startswith("state/") for name in files)
    reads: Counter[str] = Counter()
    plain_open = LocalFileSystem._open

    def counting_open(self, path, mode="rb", *args, **kwargs):
        if "r" in mode:
            reads[self._strip_protocol(path)] += 1
        return plain_open(self, path, mode, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "_open", counting_open)
    produce_more(job)
    assert cli(capsys, "restore", "--job-home", job.home, "--savepoint", savepoint_id).code == 0
    savepoint = job.home / "savepoints" / savepoint_id
    assert {name: reads[str(savepoint / name)] for name in files} == dict.fromkeys(files, 1)
    monkeypatch.undo()
    assert counts(spark, job) == {0: 10, 1: 10}, "restored state 6 + the 4 records produced after the savepoint"


def test_restore_of_a_damaged_savepoint_is_refused_and_changes_nothing(capsys, spark, kafka_bootstrap, tmp_path):
    """The check happens while copying now: what was copied before the damaged file is removed again."""
    job = stateful_job(spark, kafka_bootstrap, tmp_path / "home")
    savepoint_id, files = create(capsys, job)
    logs = sorted(name for name in files if name.startswith(("offsets/", "commits/")))
    with open(job.home / "savepoints" / savepoint_id / logs[-1], "ab") as damaged:  # copied last
        damaged.write(b"\n")
    before = snapshot(job)
    generations = sorted(os.listdir(job.home / "checkpoints"))
    refused = cli(capsys, "restore", "--job-home", job.home, "--savepoint", savepoint_id)
    assert refused.code == 2, refused.err
    assert f"{logs[-1]}: sha256" in refused.err and "damaged" in refused.err
    assert_unchanged(job, before)
    assert sorted(os.listdir(job.home / "checkpoints")) == generations, "no trace of the new generation"
