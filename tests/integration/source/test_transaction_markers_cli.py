"""The control plane over real Kafka's offset gaps: verify, reset and restore of a job on a transactional topic.

The job reads the topic of test_transaction_markers (committed and aborted
transactions over 4 partitions, see ``script()`` there) with real Spark, from a
job home the CLI works on. Targets of a reset or a savepoint may be offsets
that hold a marker, not a record; a query restarted there must read from the
first real record at or after each target, and end at the high watermark.

A ``--to-datetime`` after the last record lands on the high watermark, past
the last marker.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from tests.integration.cli_helpers import (
    Job,
    cli,
    commit_group,
    make_job,
    starting_offsets,
)
from tests.integration.source.test_transaction_markers import POLL_TIMEOUT_MS, run_within_deadline, script
from tests.kafka_transactions import TransactionalTopic, new_topic, play, transaction

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world(spark, transactional_cluster, tmp_path_factory) -> dict:
    topic = play(new_topic(transactional_cluster, "txn-cli"), script())
    root = tmp_path_factory.mktemp("txn-cli")
    job = make_job(spark, transactional_cluster.bootstrap, root / "home", {topic.name: topic.partitions})
    assert job.position() == high(topic), "make_job read the topic to its end"
    return {"spark": spark, "topic": topic, "job": job}


def high(topic: TransactionalTopic) -> dict[TopicPartition, int]:
    return {TopicPartition(topic.name, p): o for p, o in topic.high.items()}


def resume(spark, job: Job) -> list[tuple[int, int, bytes]]:
    """Run the job's query (availableNow, batches of at most 3 offsets) on its checkpoint; the rows in read order."""
    frame = (spark.readStream.format("kafka_stream").option("kafka.bootstrap.servers", job.bootstrap)
             .option("subscribe", ",".join(sorted(job.topics))).option("startingOffsets", starting_offsets(job))
             .option("maxOffsetsPerTrigger", "3").option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
             .load().select("partition", "offset", "value"))
    got: dict[int, list[tuple[int, int, bytes]]] = {}
    run_within_deadline(frame.writeStream.foreachBatch(
        lambda df, n: got.__setitem__(n, [tuple(r) for r in df.collect()])), job.checkpoint)
    return [row for _, rows in sorted(got.items()) for row in rows]


@pytest.fixture
def job(world, tmp_path) -> Job:
    """A copy of the world's job, its checkpoint at the high watermarks, for an operation that moves offsets.
    """
    topic = world["topic"]
    job = world["job"].copy(tmp_path / "home")
    if job.position() != high(topic):
        resume(world["spark"], job)
    assert job.position() == high(topic)
    return job


def home(job: Job) -> list[str]:
    return ["--job-home", str(job.home)]


def plan(capsys, job: Job, *strategy: str) -> dict[TopicPartition, int]:
    """The dry run's target per partition (every partition is in scope here)."""
    dry = cli(capsys, "reset", *home(job), *strategy, "--json")
    assert dry.code == 0, dry.err
    return {TopicPartition(r["topic"], r["partition"]): r["target"] for r in dry.json()["partitions"]}


def execute(capsys, job: Job, *strategy: str) -> None:
    done = cli(capsys, "reset", *home(job), *strategy, "--execute")
    assert done.code == 0, done.out + done.err
    assert "verified: checkpoint" in done.out


def check_resumes_at(world, job: Job, targets: dict[TopicPartition, int]) -> None:
    """A query restarted on the job's checkpoint reads every record from each target on, first the first real
    record at or after the target (never a marker), and ends with its checkpoint at the high watermarks."""
    topic: TransactionalTopic = world["topic"]
    rows = resume(world["spark"], job)
    for tp, target in targets.items():
        read = [(offset, value) for partition, offset, value in rows if partition == tp.partition]
        expected = [(r.offset, r.value) for r in sorted(topic.records, key=lambda r: r.offset)
                    if r.partition == tp.partition and r.offset >= target]
        assert read == expected, f"{tp} from {target}"
        first = topic.first_record_at_or_after(tp.partition, target)
        assert read[:1] == ([(first.offset, first.value)] if first else [])
    assert job.position() == high(topic), "the restarted query ends at the high watermarks"


def test_verify_at_the_watermarks_past_the_last_marker(capsys, world):
    """A job read to the end stands at the high watermarks (after the last marker): OK, lag 0."""
    topic, job = world["topic"], world["job"]
    if job.position() != high(topic):
        resume(world["spark"], job)
    commit_group(job.bootstrap, job.group, job.position())  # as the runtime leaves it after a batch
    result = cli(capsys, "verify", *home(job), "--json")
    assert result.code == 0, result.out + result.err
    answer = result.json()
    assert answer["status"] == "OK" and answer["total_lag"] == 0
    rows = {r["partition"]: (r["status"], r["checkpoint_offset"], r["group_offset"], r["high"], r["lag"])
            for r in answer["partitions"]}
    assert rows == {p: ("OK", o, o, o, 0) for p, o in topic.high.items()}
    assert all(topic.is_marker(p, o - 1) for p, o in topic.high.items()), "every partition ends on a marker"
    assert cli(capsys, "verify", *home(job)).code == 0


@pytest.mark.parametrize("shift, on_markers", [(-1, {0, 1, 2, 3}), (-3, {0, 3}), (-5, {0, 2})])
def test_shift_by_onto_and_across_markers(capsys, world, job, shift, on_markers):
    topic: TransactionalTopic = world["topic"]
    targets = {tp: max(0, offset + shift) for tp, offset in high(topic).items()}
    assert {tp.partition for tp, o in targets.items() if topic.is_marker(tp.partition, o)} == on_markers
    assert plan(capsys, job, "--shift-by", str(shift)) == targets
    execute(capsys, job, "--shift-by", str(shift))
    assert job.position() == targets
    check_resumes_at(world, job, targets)


def test_to_datetime_after_the_last_record_is_past_the_last_marker(capsys, world, job):
    """A time after every record (the only time the mock answers truly: it knows no record at or after any
    time) resolves to the high watermark, after the last marker; a restart there reads the next records."""
    topic: TransactionalTopic = world["topic"]
    execute(capsys, job, "--to-earliest")
    time.sleep(0.05)
    when = datetime.now(UTC).isoformat()
    targets = high(topic)
    assert plan(capsys, job, "--to-datetime", when) == targets
    execute(capsys, job, "--to-datetime", when)
    assert job.position() == targets
    play(topic, [*transaction("P", {0: ["n0"], 1: ["n1"]}, commit=True), *transaction("P", {2: ["nx"]}, commit=False),
                 *transaction("P", {3: ["n2", "n3"]}, commit=True)])
    check_resumes_at(world, job, targets)


def test_savepoint_on_markers_then_restore(capsys, world, job):
    """A savepoint taken where the checkpoint stands on markers restores there exactly, after more data came."""
    topic: TransactionalTopic = world["topic"]
    execute(capsys, job, "--shift-by", "-3")
    saved = job.position()
    assert any(topic.is_marker(tp.partition, o) for tp, o in saved.items())
    made = cli(capsys, "savepoint", "create", *home(job), "--json")
    assert made.code == 0, made.err
    manifest = made.json()
    assert manifest["offsets"] == {topic.name: {str(tp.partition): o for tp, o in saved.items()}}

    resume(world["spark"], job)
    play(topic, [*transaction("P", {0: ["s0"], 3: ["s1"]}, commit=True), *transaction("P", {1: ["sx"]}, commit=False)])
    resume(world["spark"], job)
    assert job.position() == high(topic)

    restored = cli(capsys, "restore", *home(job), "--savepoint", manifest["id"], "--json")
    assert restored.code == 0, restored.err
    assert job.position() == saved
    check_resumes_at(world, job, saved)
