"""Helpers for the end-to-end CLI tests: a job home whose checkpoint real Spark wrote, and snapshots of it.

A :class:`Job` is a job home (``job.json``, ``generations/0001.json``, a
``checkpoints/0001`` written by a real ``format("kafka_stream")`` query with an
``availableNow`` trigger) over topics the test produced, with the consumer
group committed at the checkpoint's position, as the runtime leaves it.
:func:`snapshot` captures what a refused operation must not change: every file
of the checkpoints, generations and savepoints (names and bytes) and the
group's committed offsets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition, to_nested
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.conftest import ROOT
from tests.kafka_utils import unique

CONSOLE_SCRIPT = str(Path(sys.executable).with_name("airflow-kafka-stream"))
#: Parts of a job home whose bytes a refused operation must leave alone.
GUARDED = ("job.json", "status.json", "checkpoints", "generations", "savepoints", "control")


@dataclass
class Job:
    """A job home over real topics, with a checkpoint written by real Spark."""

    home: Path
    bootstrap: str
    group: str
    topics: dict[str, int]  # topic -> partitions
    sink: str | None = None  # parquet output directory, or None for a foreachBatch collector
    extra: dict[str, Any] = field(default_factory=dict)
    source: str = "kafka_stream"  # the format its query reads with: this project's, or Spark's connector "kafka"
    #: Its query counts each record it reads in Spark's state (see :func:`consume`).
    stateful: bool = False

    @property
    def jobhome(self) -> JobHome:
        return JobHome(str(self.home))

    @property
    def checkpoint(self) -> str:
        return self.jobhome.checkpoint_url()

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, n in sorted(self.topics.items()) for p in range(n)]

    def position(self) -> dict[TopicPartition, int]:
        return read_position(self.checkpoint).source_offsets(0)

    def group_offsets(self) -> dict[TopicPartition, int]:
        return group_offsets(self.bootstrap, self.group, self.partitions())

    def history(self) -> list[dict[str, Any]]:
        return self.jobhome.history()

    def copy(self, destination: Path) -> Job:
        """The same job (same topics and group) in a copied home, to damage without harming others."""
        shutil.copytree(self.home, destination)
        return Job(destination, self.bootstrap, self.group, dict(self.topics), self.sink, dict(self.extra),
                   self.source, self.stateful)


def write_job_json(home: Path, bootstrap: str, group: str, topics: Sequence[str], sink: str | None = None) -> None:
    home.mkdir(parents=True, exist_ok=True)
    spec = {"job": home.name, "topics": list(topics), "group": group, "kafka": {"bootstrap.servers": bootstrap},
            "sink_path": sink, "version": "1.0"}
    (home / "job.json").write_text(json.dumps(spec, indent=2))


def make_job(spark, bootstrap: str, home: Path, topics: dict[str, int], sink: str | None = None,
             stateful_conf: dict[str, str] | None = None, group: str | None = None,
             source: str = "kafka_stream", stateful: bool = False) -> Job:
    """A job home whose generation 0001 real Spark wrote by reading ``topics`` from earliest to the end, with
    ``source`` (``kafka_stream``, or Spark's connector ``kafka``); a ``stateful`` job's query keeps state."""
    group = group or unique("cli-group")
    write_job_json(home, bootstrap, group, sorted(topics), sink)
    job = Job(home, bootstrap, group, dict(topics), sink, source=source, stateful=stateful)
    job.jobhome.new_generation("submit", start_offsets="earliest")
    if stateful_conf:
        run_stateful(spark, job, stateful_conf)
    else:
        consume(spark, job)
    commit_group(bootstrap, group, job.position())
    return job


def source_frame(spark, job: Job, starting: str):
    return (
        spark.readStream.format(job.source)
        .option("kafka.bootstrap.servers", job.bootstrap)
        .option("subscribe", ",".join(sorted(job.topics)))
        .option("startingOffsets", starting)
        .load()
    )


def starting_offsets(job: Job) -> str:
    """What the runtime would start a fresh generation at: its recorded start offsets, else earliest."""
    home = job.jobhome
    info = home.generation_info(home.current_generation()) or {}
    start = info.get("start_offsets")
    return json.dumps(start, separators=(",", ":"), sort_keys=True) if isinstance(start, dict) else "earliest"


def consume(spark, job: Job) -> list[tuple[str, int, int]]:
    """Run the job's query once (availableNow) on its current checkpoint; the (topic, partition, offset) read.

    A stateful job's query counts each record's reads in Spark's state (a count per topic, partition and offset,
    update mode): every record read must come with a count one above the reads of it this checkpoint generation
    saw before, so the state carried over every reset and restart exactly."""
    frame = source_frame(spark, job, starting_offsets(job))
    if job.stateful:
        return _consume_counting(frame, job)
    writer = frame.writeStream.option("checkpointLocation", job.checkpoint).trigger(availableNow=True)
    got: list[tuple[str, int, int]] = []
    if job.sink:
        query = (frame.selectExpr("topic", "partition", "offset").writeStream
                 .option("checkpointLocation", job.checkpoint).trigger(availableNow=True)
                 .format("parquet").option("path", job.sink).start())
    else:
        query = writer.foreachBatch(
            lambda df, _b: got.extend((r.topic, r.partition, r.offset) for r in df.select(
                "topic", "partition", "offset").collect())).start()
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    return sorted(got)


def _consume_counting(frame, job: Job) -> list[tuple[str, int, int]]:
    seen = job.extra.setdefault(f"reads of generation {job.jobhome.current_generation()}", {})
    got: list[tuple[str, int, int, int]] = []
    counts = frame.groupBy("topic", "partition", "offset").count()
    query = (counts.writeStream.option("checkpointLocation", job.checkpoint).outputMode("update")
             .trigger(availableNow=True)
             .foreachBatch(lambda df, _b: got.extend((r.topic, r.partition, r.offset, r["count"])
                                                     for r in df.collect())).start())
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    wrong = {(t, p, o): (n, seen.get((t, p, o), 0) + 1) for t, p, o, n in got if n != seen.get((t, p, o), 0) + 1}
    assert not wrong, f"records whose count in the state is not their reads so far ((got, wanted) each): {wrong}"
    seen.update({(t, p, o): n for t, p, o, n in got})
    return sorted((t, p, o) for t, p, o, _n in got)


STATEFUL_CONF = {"spark.sql.streaming.stateStore.providerClass":
                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}


def run_stateful(spark, job: Job, conf: dict[str, str]) -> None:
    """A streaming count per partition (stateful) under the given state store settings."""
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        counts = source_frame(spark, job, starting_offsets(job)).groupBy("partition").count()
        query = (counts.writeStream.option("checkpointLocation", job.checkpoint).outputMode("complete")
                 .format("noop").trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None, query.exception()
    finally:
        for key in conf:
            spark.conf.unset(key)


def reads_from(rows: list[tuple[str, int, int]]) -> dict[TopicPartition, tuple[int, int]]:
    """Per partition: (first offset read, rows read)."""
    out: dict[TopicPartition, list[int]] = {}
    for topic, partition, offset in rows:
        out.setdefault(TopicPartition(topic, partition), []).append(offset)
    return {tp: (min(offsets), len(offsets)) for tp, offsets in out.items()}


def expected_reads(targets: dict[TopicPartition, int], highs: dict[TopicPartition, int]) -> dict:
    """What a restart at ``targets`` must read: from each target to the high watermark."""
    return {tp: (off, highs[tp] - off) for tp, off in targets.items() if highs[tp] > off}


# -- Kafka group ------------------------------------------------------------------------------------

def commit_group(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit offsets as a standalone consumer would (the runtime does this after each batch)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def group_offsets(bootstrap: str, group: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        answer = consumer.committed([KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions], timeout=10)
        return {TopicPartition(tp.topic, tp.partition): tp.offset for tp in answer}
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("hw"), "enable.auto.commit": False})
    try:
        return {tp: consumer.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition), timeout=10)[1]
                for tp in partitions}
    finally:
        consumer.close()


# -- snapshots ------------------------------------------------------------------------------------

def output_args(output: Path, extra: Sequence[str]) -> list[str]:
    """The example pipeline's ``--output`` folder, unless ``extra`` names an output topic instead (it takes one)."""
    return [] if "--output-topic" in extra else ["--output", str(output)]


def file_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative name -> bytes)."""
    files: dict[str, bytes] = {}
    if root.is_file():
        return {root.name: root.read_bytes()}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


@dataclass(frozen=True)
class Snapshot:
    files: dict[str, bytes]
    group: dict[TopicPartition, int]


#: A state store snapshot (and its checksum or temporary file): the test's own Spark session writes them in its
#: state store maintenance, every minute, from the deltas it committed (a compaction, same state). They are not the
#: CLI's doing, and a stopped job's driver - the case in production - writes none.
SPARK_MAINTENANCE = re.compile(r"/state/(.*/)?\.*\d+\.snapshot")


def snapshot(job: Job) -> Snapshot:
    """The job home's guarded files (names + bytes, but Spark's state snapshots) and the group's committed offsets."""
    files: dict[str, bytes] = {}
    for part in GUARDED:
        path = job.home / part
        if path.exists():
            files.update({f"{part}/{name}": data for name, data in file_tree(path).items()
                          if not SPARK_MAINTENANCE.search(f"{part}/{name}")})
    return Snapshot(files, job.group_offsets())


def assert_unchanged(job: Job, before: Snapshot) -> None:
    after = snapshot(job)
    added = sorted(set(after.files) - set(before.files))
    removed = sorted(set(before.files) - set(after.files))
    changed = sorted(n for n in set(after.files) & set(before.files) if after.files[n] != before.files[n])
    assert (added, removed, changed) == ([], [], []), f"job home files changed: {added=} {removed=} {changed=}"
    assert after.group == before.group, "group offsets changed"


# -- running the CLI ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli(capsys, *argv: str) -> CliResult:
    """Run the CLI in-process; usage errors (argparse's SystemExit) become exit codes too."""
    from airflow_kafka_stream.cli import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def cli_subprocess(*argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run the installed console script as a user would."""
    return subprocess.run([CONSOLE_SCRIPT, *map(str, argv)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


#: Quick gates for a test's upgrade: a fresh first batch may be slow, after it 10 s of lag not growing is healthy.
FAST_UPGRADE = ("--health-batches", "1", "--health-window", "10", "--health-startup", "90", "--health-timeout",
                "180", "--stop-timeout", "60", "--start-timeout", "300", "--standby-timeout", "300")


def run(*argv: str, timeout: float = 600.0) -> tuple[int, str, str]:
    """The console script's exit code, standard output and standard error."""
    done = cli_subprocess(*argv, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def wait_running(home: Path, version: str, pid_not: int | None = None, timeout: float = 240.0) -> dict:
    """The status once ``version`` runs in a driver other than ``pid_not`` and has committed a batch."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = JobHome(str(home)).status() or {}
        if (status.get("state") == "RUNNING" and JobHome(str(home)).spec().get("version") == version
                and (status.get("batches_this_run") or 0) >= 1 and status.get("pid") != pid_not):
            return status
        time.sleep(1)
    raise AssertionError(f"version {version} is not running with a batch: {JobHome(str(home)).status()}")


def nested(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    return to_nested(offsets)
