"""A query that unions two ``kafka_stream`` readers: every operation handles each source line as its own.

The job reads topic A (2 partitions) in one reader and topic B (1 partition) in
another, so ``offsets/N`` holds two Kafka source lines. A got 10 records per
partition and B 6 before the time T (a few milliseconds apart on each side:
Kafka finds offsets for times to the millisecond), then A 5 and B 4 more. Each test
starts with the checkpoint at the end and the group there too; a reset must
put each source's targets in that source's line, and real Spark restarted on
the checkpoint must read exactly from the targets of both sources.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition, parse_offsets_json
from airflow_kafka_stream.errors import InvalidInputError, KafkaAccessError
from airflow_kafka_stream.ops import reset as reset_ops
from airflow_kafka_stream.ops.context import build_context
from tests.integration.cli_helpers import (
    Job,
    assert_unchanged,
    cli,
    cli_subprocess,
    commit_group,
    expected_reads,
    high_watermarks,
    reads_from,
    snapshot,
    write_job_json,
)
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

GAP = 0.02  # seconds on each side of T: Kafka answers offsets-for-times to the millisecond


def reader(spark, job: Job, topic: str, starting: str):
    return (spark.readStream.format("kafka_stream").option("kafka.bootstrap.servers", job.bootstrap)
            .option("subscribe", topic).option("startingOffsets", starting).load())


def run_union(spark, job: Job, topics: tuple[str, str]) -> list[tuple[str, int, int]]:
    """One availableNow run of ``reader(topics[0]).union(reader(topics[1]))`` on the current generation."""
    frame = reader(spark, job, topics[0], "earliest").union(reader(spark, job, topics[1], "earliest"))
    got: list[tuple[str, int, int]] = []
    query = (frame.writeStream.option("checkpointLocation", job.checkpoint).trigger(availableNow=True)
             .foreachBatch(lambda df, _b: got.extend(
                 (r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect()))
             .start())
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    return sorted(got)


def source_lines(checkpoint: str) -> dict[int, dict[TopicPartition, int]]:
    """The source lines of the committed batch, parsed as Kafka offsets, by source index."""
    return {index: parse_offsets_json(line) for index, line in enumerate(read_position(checkpoint).offsets.source_lines)}


@pytest.fixture(scope="module")
def world(spark, kafka_bootstrap, tmp_path_factory):
    a = create_topic(kafka_bootstrap, unique("multi-a"), partitions=2)
    b = create_topic(kafka_bootstrap, unique("multi-b"), partitions=1)
    for p in (0, 1):
        produce(kafka_bootstrap, a, [(None, f"early-{p}-{i}") for i in range(10)], partition=p)
    produce(kafka_bootstrap, b, [(None, f"b-early-{i}") for i in range(6)], partition=0)
    time.sleep(GAP)
    t = time.time()
    time.sleep(GAP)
    for p in (0, 1):
        produce(kafka_bootstrap, a, [(None, f"late-{p}-{i}") for i in range(5)], partition=p)
    produce(kafka_bootstrap, b, [(None, f"b-late-{i}") for i in range(4)], partition=0)
    home = tmp_path_factory.mktemp("multi") / "home"
    group = unique("multi-group")
    write_job_json(home, kafka_bootstrap, group, [a, b])
    job = Job(home, kafka_bootstrap, group, {a: 2, b: 1})
    job.jobhome.new_generation("submit", start_offsets="earliest")
    run_union(spark, job, (a, b))
    highs = high_watermarks(kafka_bootstrap, job.partitions())
    assert highs == {TopicPartition(a, 0): 15, TopicPartition(a, 1): 15, TopicPartition(b, 0): 10}
    # Spark numbers the union's readers in plan order: A is source 0, B source 1.
    assert source_lines(job.checkpoint) == {0: {TopicPartition(a, 0): 15, TopicPartition(a, 1): 15},
                                            1: {TopicPartition(b, 0): 10}}
    return {"job": job, "a": a, "b": b, "t": t, "highs": highs, "spark": spark}


@pytest.fixture
def job(world):
    """The shared job at the end of every partition, group committed there (as each test leaves it)."""
    job = world["job"]
    if union_position(job) != world["highs"]:
        run_union(world["spark"], job, (world["a"], world["b"]))
    assert union_position(job) == world["highs"]
    commit_group(job.bootstrap, job.group, world["highs"])
    return job


def union_position(job: Job) -> dict[TopicPartition, int]:
    merged: dict[TopicPartition, int] = {}
    for line in source_lines(job.checkpoint).values():
        merged.update(line)
    return merged


def offsets(world, a0: int, a1: int, b0: int) -> dict[TopicPartition, int]:
    return {TopicPartition(world["a"], 0): a0, TopicPartition(world["a"], 1): a1, TopicPartition(world["b"], 0): b0}


def by_source(world, targets: dict[TopicPartition, int]) -> dict[int, dict[TopicPartition, int]]:
    return {0: {tp: o for tp, o in targets.items() if tp.topic == world["a"]},
            1: {tp: o for tp, o in targets.items() if tp.topic == world["b"]}}


def assert_resumes_at(world, job: Job, targets: dict[TopicPartition, int]) -> None:
    """Real Spark restarted on the checkpoint reads each partition of both sources from its target to the end."""
    rows = run_union(world["spark"], job, (world["a"], world["b"]))
    assert reads_from(rows) == expected_reads(targets, world["highs"]), "Spark resumed at every source's targets"
    assert union_position(job) == world["highs"]


# -- checkpoint and verify show every source -------------------------------------------------------------------------

def test_checkpoint_shows_every_source(capsys, world, job):
    home = ["--job-home", str(job.home)]
    shown = cli(capsys, "checkpoint", *home, "--json")
    assert shown.code == 0, shown.err
    data = shown.json()
    a, b = world["a"], world["b"]
    assert data["kafka_sources"] == {"0": {a: {"0": 15, "1": 15}}, "1": {b: {"0": 10}}}
    assert data["offsets"] == {a: {"0": 15, "1": 15}, b: {"0": 10}}
    text = cli(capsys, "checkpoint", *home)
    rows = [line.split() for line in text.out.splitlines()]
    assert ["SOURCE", "TOPIC", "PARTITION", "NEXT", "OFFSET"] in rows
    assert ["0", a, "0", "15"] in rows and ["0", a, "1", "15"] in rows and ["1", b, "0", "10"] in rows


def test_verify_reports_every_partition_of_both_sources(capsys, world, job):
    result = cli(capsys, "verify", "--job-home", str(job.home), "--json")
    assert result.code == 0, result.out + result.err
    rows = {(r["topic"], r["partition"]): (r["checkpoint_offset"], r["group_offset"], r["status"])
            for r in result.json()["partitions"]}
    assert rows == {(world["a"], 0): (15, 15, "OK"), (world["a"], 1): (15, 15, "OK"),
                    (world["b"], 0): (10, 10, "OK")}


# -- resets ----------------------------------------------------------------------------------------------------------

STRATEGIES = {
    "to-earliest": (["--to-earliest"], lambda w: offsets(w, 0, 0, 0)),
    "to-datetime": (None, lambda w: offsets(w, 10, 10, 6)),
    "shift-by": (["--shift-by", "-3"], lambda w: offsets(w, 12, 12, 7)),
    "to-offset-per-partition": (None, lambda w: offsets(w, 4, 15, 2)),
    "to-current": (["--to-current"], lambda w: offsets(w, 15, 15, 10)),
}


def strategy_args(world, name: str) -> list[str]:
    if name == "to-datetime":
        return ["--to-datetime", datetime.fromtimestamp(world["t"], UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")]
    if name == "to-offset-per-partition":
        return ["--to-offset", f"{world['a']}:0=4,{world['b']}:0=2"]
    return STRATEGIES[name][0]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_reset_moves_each_source_line_and_spark_resumes_there(capsys, world, job, name):
    home = ["--job-home", str(job.home)]
    strategy = strategy_args(world, name)
    targets = STRATEGIES[name][1](world)
    if name == "to-current":  # to-current aligns a group that drifted: move the group away first
        commit_group(job.bootstrap, job.group, offsets(world, 1, 1, 1))
    before = snapshot(job)
    dry = cli(capsys, "reset", *home, *strategy, "--json")
    assert dry.code == 0, dry.err
    rows = dry.json()["partitions"]
    assert {TopicPartition(r["topic"], r["partition"]): r["checkpoint_offset"] for r in rows} == world["highs"]
    assert {TopicPartition(r["topic"], r["partition"]): r["target"] if r["in_scope"] else r["checkpoint_offset"]
            for r in rows} == targets
    assert not any("new partition" in (r["warning"] or "") for r in rows), "B is in the checkpoint (source 1)"
    assert_unchanged(job, before)

    done = cli(capsys, "reset", *home, *strategy, "--execute")
    assert done.code == 0, done.err
    assert "verified: checkpoint and group are at the targets" in done.out
    assert source_lines(job.checkpoint) == by_source(world, targets), "each source's line holds its own targets"
    changed = {TopicPartition(r["topic"], r["partition"]) for r in rows if r["in_scope"]}
    assert job.group_offsets() == {tp: o if tp in changed else before.group[tp] for tp, o in targets.items()}
    assert job.history()[-1]["result"] == "ok"
    assert_resumes_at(world, job, targets)


# -- savepoints, reset to a savepoint, restore -----------------------------------------------------------------------

def test_savepoint_reset_to_it_and_restore_keep_both_sources(capsys, world, job):
    home = ["--job-home", str(job.home)]
    a, b = world["a"], world["b"]
    made = cli(capsys, "savepoint", "create", *home, "--json")
    assert made.code == 0, made.err
    saved = made.json()
    assert saved["sources"] == {"0": {a: {"0": 15, "1": 15}}, "1": {b: {"0": 10}}}
    shown = cli(capsys, "savepoint", "show", saved["id"], *home, "--json").json()
    assert shown["sources"] == saved["sources"] and shown["offsets"] == {a: {"0": 15, "1": 15}, b: {"0": 10}}

    # Move away, then back to the savepoint: each source line returns to the savepoint's.
    assert cli(capsys, "reset", *home, "--to-earliest", "--execute").code == 0
    back = cli(capsys, "reset", *home, "--to-savepoint", saved["id"], "--execute")
    assert back.code == 0, back.err
    assert source_lines(job.checkpoint) == by_source(world, world["highs"])
    assert job.group_offsets() == world["highs"]

    # Restore keeping state: a copy of the savepoint, which Spark resumes after (nothing new to read).
    assert cli(capsys, "reset", *home, "--to-earliest", "--execute").code == 0
    restored = cli(capsys, "restore", *home, "--savepoint", saved["id"])
    assert restored.code == 0, restored.err
    assert source_lines(job.checkpoint) == by_source(world, world["highs"])
    assert_resumes_at(world, job, world["highs"])


def test_drop_state_on_two_sources_is_refused_before_anything_changes(capsys, world, job):
    home = ["--job-home", str(job.home)]
    made = cli(capsys, "savepoint", "create", *home, "--json")
    assert made.code == 0, made.err
    before = snapshot(job)
    refused = cli(capsys, "restore", *home, "--savepoint", made.json()["id"], "--drop-state")
    assert refused.code == 2
    assert "2 Kafka sources" in refused.err and "startingOffsets" in refused.err
    refused = cli(capsys, "reset", *home, "--to-earliest", "--execute", "--drop-state")
    assert refused.code == 2
    assert "2 Kafka sources" in refused.err and "without drop_state" in refused.err and "--drop-state" in refused.err
    assert_unchanged(job, before)
    assert [r["result"] for r in job.history()[-2:]] == ["refused", "refused"]


# -- item 4: after the append, every failure is "incomplete" ---------------------------------------------------------

@pytest.mark.parametrize(
    ("patched", "error"),
    [
        pytest.param("alter_group_offsets", InvalidInputError("group step refused the offsets"), id="group-input"),
        pytest.param("alter_group_offsets", KafkaAccessError("broker went away"), id="group-kafka"),
        pytest.param("committed_offsets", InvalidInputError("verification input"), id="verify-input"),
        pytest.param("committed_offsets", KafkaAccessError("broker went away while verifying"), id="verify-kafka"),
    ],
)
def test_failure_after_the_append_is_incomplete_not_refused(capsys, monkeypatch, world, job, patched, error):
    def fail(*_args, **_kwargs):
        raise error

    batch = read_position(job.checkpoint).batch_id
    monkeypatch.setattr(reset_ops, patched, fail)
    result = cli(capsys, "reset", "--job-home", str(job.home), "--to-earliest", "--execute")
    assert result.code == 1, result.err
    assert "nothing changed" not in result.err.lower()
    assert "incomplete" in result.err and f"batch {batch + 1} was appended" in result.err, result.err
    assert str(error) in result.err
    record = job.history()[-1]
    assert record["operation"] == "reset" and record["result"] == "failed"
    assert source_lines(job.checkpoint) == by_source(world, offsets(world, 0, 0, 0)), "the append stands"
    monkeypatch.undo()
    assert_resumes_at(world, job, offsets(world, 0, 0, 0))


# -- item 3: the generation is chosen under the lock -----------------------------------------------------------------

def test_reset_follows_a_restore_that_finished_before_it_took_the_lock(capsys, world, job):
    """The context is resolved (generation g) before the lock; a restore in another process makes g+1 current."""
    home = ["--job-home", str(job.home)]
    made = cli(capsys, "savepoint", "create", *home, "--json")
    assert made.code == 0, made.err
    ctx = build_context(job_home=str(job.home))
    stale = ctx.checkpoint_url
    stale_files = snapshot(job).files
    restored = cli_subprocess("restore", *home, "--savepoint", made.json()["id"], "--json")
    assert restored.returncode == 0, restored.stderr
    current = job.checkpoint
    assert current != stale

    outcome = reset_ops.execute(ctx, reset_ops.ResetRequest("to-earliest"))
    assert outcome.verified and outcome.checkpoint == current
    targets = offsets(world, 0, 0, 0)
    assert source_lines(current) == by_source(world, targets)
    assert source_lines(stale) == by_source(world, world["highs"]), "the old generation is untouched"
    old = stale.rsplit("/", 1)[-1]
    assert {n: d for n, d in snapshot(job).files.items() if n.startswith(f"checkpoints/{old}/")} == \
        {n: d for n, d in stale_files.items() if n.startswith(f"checkpoints/{old}/")}
    assert job.group_offsets() == targets
    assert_resumes_at(world, job, targets)


# -- shapes that are refused -----------------------------------------------------------------------------------------

def test_a_partition_read_by_two_sources_is_refused(capsys, spark, world, tmp_path):
    home = tmp_path / "shared"
    group = unique("shared-group")
    write_job_json(home, world["job"].bootstrap, group, [world["b"]])
    shared = Job(home, world["job"].bootstrap, group, {world["b"]: 1})
    shared.jobhome.new_generation("submit", start_offsets="earliest")
    run_union(spark, shared, (world["b"], world["b"]))
    commit_group(shared.bootstrap, group, {TopicPartition(world["b"], 0): 10})
    before = snapshot(shared)
    for argv in (["reset", "--to-earliest", "--execute"], ["reset", "--to-earliest"], ["verify"]):
        result = cli(capsys, *argv, "--job-home", str(home))
        assert result.code == 2, (argv, result.out, result.err)
        assert "read by more than one Kafka source" in result.err and f"{world['b']}:0" in result.err
    assert_unchanged(shared, before)
    assert json.loads(cli(capsys, "checkpoint", "--job-home", str(home), "--json").out)["kafka_sources"] == {
        "0": {world["b"]: {"0": 10}}, "1": {world["b"]: {"0": 10}}}


def test_a_checkpoint_without_kafka_source_says_so(capsys, spark, world, tmp_path):
    """A rate-source query: `checkpoint` says there is no Kafka source; reset and verify refuse, naming why."""
    home = tmp_path / "rate"
    write_job_json(home, world["job"].bootstrap, unique("rate-group"), [world["b"]])
    rate = Job(home, world["job"].bootstrap, "unused", {world["b"]: 1})
    rate.jobhome.new_generation("submit", start_offsets="earliest")
    query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load().writeStream
             .option("checkpointLocation", rate.checkpoint).format("noop").trigger(availableNow=True).start())
    query.awaitTermination()
    shown = cli(capsys, "checkpoint", "--job-home", str(home))
    assert shown.code == 0 and "no Kafka source" in shown.out, shown.out
    data = cli(capsys, "checkpoint", "--job-home", str(home), "--json").json()
    assert data["kafka_sources"] == {} and data["offsets"] is None and len(data["sources"]) == 1
    before = snapshot(rate)
    for argv in (["reset", "--to-earliest", "--execute"], ["reset", "--to-earliest"], ["verify"]):
        result = cli(capsys, *argv, "--job-home", str(home))
        assert result.code == 2, (argv, result.out, result.err)
        assert "has no Kafka source" in result.err and "pass the index" not in result.err, result.err
    assert_unchanged(rate, before)
