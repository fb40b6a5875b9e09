"""Every reset strategy end to end: CLI plan → execute → checkpoint and group moved → real Spark resumes there.

One job reads topic A (2 partitions) and topic B (1 partition). A got 10
records per partition, then (milliseconds later: Kafka finds offsets for times
to the millisecond) the time T, then 5 more; B got 5 records
before T. Each test starts with the checkpoint at the end (A 15/15, B 5) and
leaves it there: a dry run changes nothing, ``--execute`` appends a batch and
moves the group, and a real Spark query restarted on the checkpoint reads
exactly from the targets to the end. The whole module runs three times: the job's query reads with this project's
source, then with Spark's own connector (``format("kafka")``), then with the connector in a stateful query that
counts each record's reads in Spark's state (every record read again after a reset must find its earlier reads
there, so the state carried over the appended batch exactly).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition
from tests.integration.cli_helpers import (
    assert_unchanged,
    cli,
    commit_group,
    consume,
    expected_reads,
    high_watermarks,
    make_job,
    reads_from,
    snapshot,
)
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

GAP = 0.02  # seconds before T: Kafka answers offsets-for-times to the millisecond
#: Seconds after T: --by-duration counts back from the CLI's clock, read later than the test's.
GAP_AFTER = 2.0


@pytest.fixture(scope="module", params=["kafka_stream", "kafka", "kafka-stateful"])
def world(request, spark, kafka_bootstrap, tmp_path_factory):
    a = create_topic(kafka_bootstrap, unique("cli-reset-a"), partitions=2)
    b = create_topic(kafka_bootstrap, unique("cli-reset-b"), partitions=1)
    for p in (0, 1):
        produce(kafka_bootstrap, a, [(None, f"early-{p}-{i}") for i in range(10)], partition=p)
    produce(kafka_bootstrap, b, [(None, f"b-{i}") for i in range(5)], partition=0)
    time.sleep(GAP)
    t = time.time()
    time.sleep(GAP_AFTER)
    for p in (0, 1):
        produce(kafka_bootstrap, a, [(None, f"late-{p}-{i}") for i in range(5)], partition=p)
    source, _, kind = request.param.partition("-")
    job = make_job(spark, kafka_bootstrap, tmp_path_factory.mktemp("cli-reset") / "home", {a: 2, b: 1},
                   source=source, stateful=kind == "stateful")
    highs = high_watermarks(kafka_bootstrap, job.partitions())
    assert highs == {TopicPartition(a, 0): 15, TopicPartition(a, 1): 15, TopicPartition(b, 0): 5}
    return {"job": job, "a": a, "b": b, "t": t, "highs": highs, "spark": spark}


@pytest.fixture
def job(world):
    """The shared job, with its checkpoint at the end of every partition (as each test leaves it)."""
    job = world["job"]
    if job.position() != world["highs"]:
        consume(world["spark"], job)
    assert job.position() == world["highs"]
    commit_group(job.bootstrap, job.group, world["highs"])  # as the runtime leaves it after a batch
    return job


def offsets(world, a0: int, a1: int, b0: int) -> dict[TopicPartition, int]:
    return {TopicPartition(world["a"], 0): a0, TopicPartition(world["a"], 1): a1, TopicPartition(world["b"], 0): b0}


def plan_targets(result) -> dict[TopicPartition, int]:
    rows = result.json()["partitions"]
    return {TopicPartition(r["topic"], r["partition"]): r["target"] if r["in_scope"] else r["checkpoint_offset"]
            for r in rows}


def check_reset(capsys, world, job, strategy: list[str], targets: dict[TopicPartition, int],
                scope: tuple[str, ...] = ()) -> None:
    """Dry run (nothing changes) → execute → checkpoint, group, verify → real Spark restart reads from targets."""
    home = ["--job-home", str(job.home)]
    before = snapshot(job)
    dry = cli(capsys, "reset", *home, *strategy, *scope, "--json")
    assert dry.code == 0, dry.err
    assert plan_targets(dry) == targets, "the dry-run plan"
    text = cli(capsys, "reset", *home, *strategy, *scope)
    assert text.code == 0 and "Dry run: nothing changed" in text.out and "NEW-OFFSET" in text.out
    assert_unchanged(job, before)

    done = cli(capsys, "reset", *home, *strategy, *scope, "--execute")
    assert done.code == 0, done.err
    assert "verified: checkpoint and group are at the targets" in done.out
    assert job.position() == targets, "the checkpoint moved to the targets"
    scoped = {TopicPartition(r["topic"], r["partition"]) for r in dry.json()["partitions"] if r["in_scope"]}
    assert scoped == _scoped(world, scope, strategy)
    assert job.group_offsets() == {tp: off if tp in scoped else before.group[tp] for tp, off in targets.items()}
    shown = cli(capsys, "checkpoint", *home, "--json").json()["offsets"]
    assert shown == {t: {str(p): o for tp, o in targets.items() if tp.topic == t for p in [tp.partition]}
                     for t in {tp.topic for tp in targets}}
    verified = cli(capsys, "verify", *home)
    assert verified.code == 0, verified.out + verified.err
    assert job.history()[-1]["operation"] == "reset" and job.history()[-1]["result"] == "ok"
    assert not (job.home / "lock").exists()

    rows = consume(world["spark"], job)
    assert reads_from(rows) == expected_reads(targets, world["highs"]), "Spark resumed at the targets"
    assert job.position() == world["highs"]


def _scoped(world, scope: tuple[str, ...], strategy: list[str]) -> set[TopicPartition]:
    """The partitions a reset moves: the scope, narrowed to the listed ones for per-partition offsets."""
    if strategy[0] == "--to-offset" and "=" in strategy[1]:
        return {TopicPartition(item.split(":")[0], int(item.split(":")[1].split("=")[0]))
                for item in strategy[1].split(",")}
    if strategy[0] == "--from-file":
        return {TopicPartition(t, int(p)) for t, p, _ in (line.split(",") for line in
                                                           open(strategy[1]).read().split())}
    if not scope:
        return set(world["highs"])
    topic, _, parts = scope[1].partition(":")
    return {tp for tp in world["highs"] if tp.topic == topic and (not parts or str(tp.partition) in parts.split(","))}


def test_to_offset_single(capsys, world, job):
    check_reset(capsys, world, job, ["--to-offset", "3"], offsets(world, 3, 3, 3))


def test_to_offset_per_partition(capsys, world, job):
    a = world["a"]
    check_reset(capsys, world, job, ["--to-offset", f"{a}:0=5,{a}:1=7"], offsets(world, 5, 7, 5))


def test_to_datetime(capsys, world, job):
    when = datetime.fromtimestamp(world["t"], UTC).isoformat()
    check_reset(capsys, world, job, ["--to-datetime", when], offsets(world, 10, 10, 5))


def test_to_datetime_naive_with_timezone(capsys, world, job):
    naive = datetime.fromtimestamp(world["t"], UTC).astimezone(ZoneInfo("Asia/Tokyo")).replace(tzinfo=None)
    check_reset(capsys, world, job, ["--to-datetime", naive.isoformat(), "--timezone", "Asia/Tokyo"], offsets(world, 10, 10, 5))


def test_to_earliest(capsys, world, job):
    check_reset(capsys, world, job, ["--to-earliest"], offsets(world, 0, 0, 0))


def test_to_latest(capsys, world, job):
    check_reset(capsys, world, job, ["--to-earliest"], offsets(world, 0, 0, 0))
    check_reset(capsys, world, job, ["--to-latest"], offsets(world, 15, 15, 5))


def test_shift_by(capsys, world, job):
    check_reset(capsys, world, job, ["--shift-by", "-4"], offsets(world, 11, 11, 1))


def test_by_duration(capsys, world, job):
    back = time.time() - world["t"]
    check_reset(capsys, world, job, ["--by-duration", f"PT{back:.3f}S"], offsets(world, 10, 10, 5))


def test_from_file_written_by_export(capsys, world, job, tmp_path):
    a = world["a"]
    exported = tmp_path / "plan.csv"
    result = cli(capsys, "reset", "--job-home", str(job.home), "--to-offset", f"{a}:0=2,{a}:1=9",
                 "--export", str(exported))
    assert result.code == 0, result.err
    assert exported.read_text() == f"{a},0,2\n{a},1,9\n"
    check_reset(capsys, world, job, ["--from-file", str(exported)], offsets(world, 2, 9, 5))


def test_to_savepoint(capsys, world, job):
    home = ["--job-home", str(job.home)]
    assert cli(capsys, "reset", *home, "--to-offset", "6", "--execute").code == 0
    created = cli(capsys, "savepoint", "create", *home, "--json")
    assert created.code == 0, created.err
    savepoint = created.json()["id"]
    consume(world["spark"], job)  # back at the end
    check_reset(capsys, world, job, ["--to-savepoint", savepoint], offsets(world, 6, 6, 5))


def test_to_current_aligns_the_group(capsys, world, job):
    home = ["--job-home", str(job.home)]
    assert cli(capsys, "reset", *home, "--to-offset", "4", "--execute").code == 0
    consume(world["spark"], job)  # the checkpoint moves on; the group stays at 4 (nobody commits it here)
    assert set(job.group_offsets().values()) == {4}
    assert cli(capsys, "verify", *home).code == 1, "the group is behind the checkpoint"
    check_reset(capsys, world, job, ["--to-current"], world["highs"])
    assert job.group_offsets() == world["highs"]


def test_scope_topic_leaves_other_topics(capsys, world, job):
    before = job.group_offsets()
    check_reset(capsys, world, job, ["--to-offset", "2"], offsets(world, 2, 2, 5), scope=("--topic", world["a"]))
    assert job.group_offsets()[TopicPartition(world["b"], 0)] == before[TopicPartition(world["b"], 0)]


def test_scope_partition_leaves_other_partitions(capsys, world, job):
    before = job.group_offsets()
    check_reset(capsys, world, job, ["--to-offset", "8"], offsets(world, 8, 15, 5),
                scope=("--topic", f"{world['a']}:0"))
    after = job.group_offsets()
    for tp in (TopicPartition(world["a"], 1), TopicPartition(world["b"], 0)):
        assert after[tp] == before[tp], f"{tp} is out of scope"


def test_scope_leaves_the_group_of_other_partitions_alone(capsys, world, job):
    """kafka-consumer-groups.sh semantics: out-of-scope partitions keep their committed offsets."""
    a1, b0 = TopicPartition(world["a"], 1), TopicPartition(world["b"], 0)
    commit_group(job.bootstrap, job.group, {a1: 9, b0: 2})  # a group behind on the out-of-scope partitions
    result = cli(capsys, "reset", "--job-home", str(job.home), "--to-offset", "8", "--topic", f"{world['a']}:0",
                 "--execute")
    assert result.code in (0, 1), result.err
    group = job.group_offsets()
    assert (group[a1], group[b0]) == (9, 2)


def test_out_of_range_is_clamped_with_a_warning(capsys, world, job):
    result = cli(capsys, "reset", "--job-home", str(job.home), "--to-offset", "100", "--json")
    assert result.code == 0
    assert plan_targets(result) == world["highs"]
    assert len(result.json()["warnings"]) == 3 and "clamped to 15" in result.json()["warnings"][0]
    text = cli(capsys, "reset", "--job-home", str(job.home), "--to-offset", "100")
    assert "above the high watermark" in text.out and "clamped" in text.out


def test_strict_refuses_out_of_range(capsys, world, job):
    before = snapshot(job)
    result = cli(capsys, "reset", "--job-home", str(job.home), "--to-offset", "100", "--strict", "--execute")
    assert result.code == 2
    assert "100" in result.err and "high watermark" in result.err
    assert_unchanged(job, before)
    assert job.history()[-1]["result"] == "refused"


def test_drop_state_starts_a_new_generation(capsys, world, job):
    """Last in this module: the job continues on checkpoints/0002 from here on."""
    a, b = world["a"], world["b"]
    before = job.position()
    result = cli(capsys, "reset", "--job-home", str(job.home), "--to-offset", "3", "--drop-state", "--execute")
    assert result.code == 0, result.err
    assert "new checkpoint generation 2" in result.out
    assert sorted(p.name for p in (job.home / "checkpoints").iterdir()) == ["0001", "0002"]
    assert list((job.home / "checkpoints" / "0002").iterdir()) == [], "a fresh, empty checkpoint"
    info = json.loads((job.home / "generations" / "0002.json").read_text())
    assert info["start_offsets"] == {a: {"0": 3, "1": 3}, b: {"0": 3}}
    assert info["reason"] == "reset-drop-state"
    assert read_position(str(job.home / "checkpoints" / "0001")).source_offsets(0) == before, "0001 is untouched"
    targets = offsets(world, 3, 3, 3)
    assert job.group_offsets() == targets
    rows = consume(world["spark"], job)
    assert reads_from(rows) == expected_reads(targets, world["highs"]), "the new generation starts at the targets"
    assert job.position() == world["highs"]
