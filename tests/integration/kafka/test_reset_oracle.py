"""Kafka's own ``kafka-consumer-groups`` as the oracle for reset plans and verify, on the same group.

One job (module scope): topic A (2 partitions) and topic B (1 partition), a checkpoint real Spark wrote at the
end of both (A 15/15, B 5) and the job's group committed there, as the runtime leaves it. A's first 10 records
and all of B's carry a timestamp two hours ago, A's last 5 one hour ago, so a time 90 minutes ago (T) falls
between them with half an hour to spare: ``--by-duration`` gives the same answer to both tools although they
read the clock seconds apart.

For every strategy both tools offer, our dry-run plan's group part (the in-scope partitions and their targets:
what an executed reset commits to the group) equals ``ConsumerGroupCommand --reset-offsets --dry-run``,
partition by partition, and verify's group offsets, log end offsets and lag equal ``--describe``. Where the
tools differ by design, the tests say so and check the difference itself (docs/reset.md, docs/verify.md):
- to-current and shift-by start from the checkpoint (Spark resumes there), Kafka's from the group's commit; a
  partition the group has no commit for is the log end offset for Kafka's to-current and an error for its
  shift-by, the checkpoint's offset for ours.
- verify's lag is the job's (log end minus checkpoint), Kafka's the group's (log end minus commit).
- a job that reads ``read_committed`` ends at the last stable offset (LSO); Kafka's tool always reads the high
  watermark, so under an open transaction its LOG-END-OFFSET, LAG and to-latest are past ours.
"""

from __future__ import annotations

import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.devstack.broker import broker_jars, java_command
from tests.integration.cli_helpers import cli, commit_group, make_job
from tests.kafka_utils import create_topic, unique

pytestmark = pytest.mark.integration

GROUP_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
HOUR_MS = 3_600_000


def produce_at(bootstrap: str, topic: str, partition: int, count: int, timestamp_ms: int) -> None:
    """``count`` records on one partition, all with the given create time."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"{timestamp_ms}-{i}", partition=partition, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def kafka_tool(bootstrap: str, group: str, *args: str) -> subprocess.CompletedProcess:
    """Run ConsumerGroupCommand (kafka-consumer-groups.sh) from the broker's jars."""
    return subprocess.run([java_command(), "-cp", f"{broker_jars()}/*", GROUP_TOOL, "--bootstrap-server", bootstrap,
                           "--group", group, *args], capture_output=True, text=True, timeout=120)


def table(stdout: str) -> list[dict[str, str]]:
    """The rows of the table Kafka's tool prints (``GROUP TOPIC PARTITION ...``), keyed by its column titles.

    Columns are separated by runs of spaces; topic names and offsets hold none, and an empty cell is ``-``.
    """
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    at = next(i for i, cells in enumerate(lines) if cells[:3] == ["GROUP", "TOPIC", "PARTITION"])
    header = lines[at]
    rows = [dict(zip(header, cells, strict=True)) for cells in lines[at + 1:] if len(cells) == len(header)]
    assert len(rows) == len(lines) - at - 1, f"lines that are not rows of the table: {stdout}"
    return rows


def kafka_plan(answer: subprocess.CompletedProcess) -> dict[TopicPartition, int]:
    assert answer.returncode == 0 and "Error" not in answer.stdout, answer.stdout + answer.stderr
    return {TopicPartition(r["TOPIC"], int(r["PARTITION"])): int(r["NEW-OFFSET"]) for r in table(answer.stdout)}


def our_plan(capsys, job, *args: str) -> dict[TopicPartition, int]:
    """The group part of our dry-run plan: the in-scope partitions and their targets (``ResetPlan.changes``)."""
    dry = cli(capsys, "reset", "--job-home", str(job.home), *args, "--json")
    assert dry.code == 0, dry.err
    return {TopicPartition(r["topic"], r["partition"]): r["target"]
            for r in dry.json()["partitions"] if r["in_scope"] and r["target"] is not None}


@pytest.fixture(scope="module")
def world(spark, kafka_bootstrap, tmp_path_factory):
    now = int(time.time() * 1000)
    a = create_topic(kafka_bootstrap, unique("oracle-a"), partitions=2)
    b = create_topic(kafka_bootstrap, unique("oracle-b"), partitions=1)
    for p in (0, 1):
        produce_at(kafka_bootstrap, a, p, 10, now - 2 * HOUR_MS)
    produce_at(kafka_bootstrap, b, 0, 5, now - 2 * HOUR_MS)
    for p in (0, 1):
        produce_at(kafka_bootstrap, a, p, 5, now - HOUR_MS)
    root = tmp_path_factory.mktemp("reset-oracle")
    job = make_job(spark, kafka_bootstrap, root / "home", {a: 2, b: 1})
    plan_file = root / "plan.csv"
    plan_file.write_text(f"{a},0,2\n{a},1,9\n{b},0,99\n")
    t = datetime.fromtimestamp((now - 90 * 60_000) / 1000, UTC).isoformat(timespec="milliseconds")
    return {"job": job, "a": a, "b": b, "t": t, "plan_file": str(plan_file), "bootstrap": kafka_bootstrap,
            "ends": {TopicPartition(a, 0): 15, TopicPartition(a, 1): 15, TopicPartition(b, 0): 5}}


def strategies(world) -> dict[str, tuple[list[str], list[str]]]:
    """id -> (the strategy and scope as both tools spell them, Kafka's scope when ours is the job's topics)."""
    a, b = world["a"], world["b"]
    every = ["--topic", a, "--topic", b]
    return {
        "to-earliest": (["--to-earliest"], every),
        "to-latest": (["--to-latest"], every),
        "to-current": (["--to-current"], every),
        "to-offset": (["--to-offset", "7"], every),  # B has 5 records: both clamp to 5
        "to-offset-above-the-end": (["--to-offset", "100"], every),
        "to-offset-one-partition": (["--to-offset", "8", "--topic", f"{a}:1"], []),
        "shift-by-back": (["--shift-by", "-4"], every),
        "shift-by-below-the-start": (["--shift-by", "-12"], every),  # A to 3, B clamped to 0
        "shift-by-past-the-end": (["--shift-by", "3"], every),
        "to-datetime": (["--to-datetime", world["t"]], every),
        "to-datetime-one-topic": (["--to-datetime", world["t"], "--topic", b], []),
        "by-duration": (["--by-duration", "PT90M"], every),
        "from-file": (["--from-file", world["plan_file"]], every),  # B's 99 is clamped to 5 by both
    }


@pytest.fixture(scope="module")
def oracle(world):
    """Kafka's answers, asked before the tests (read-only, so in parallel: each JVM costs seconds to start)."""
    job = world["job"]
    asked = {name: [*args, *scope] for name, (args, scope) in strategies(world).items()}
    with ThreadPoolExecutor(max_workers=4) as pool:
        resets = {name: pool.submit(kafka_tool, world["bootstrap"], job.group, "--reset-offsets", *args, "--dry-run")
                  for name, args in asked.items()}
        described = pool.submit(kafka_tool, world["bootstrap"], job.group, "--describe")
        exported = pool.submit(kafka_tool, world["bootstrap"], job.group, "--reset-offsets", "--to-earliest",
                               "--topic", world["a"], "--dry-run", "--export")
        return {"resets": {name: future.result() for name, future in resets.items()},
                "describe": described.result(), "export": exported.result()}


@pytest.mark.parametrize("name", ["to-earliest", "to-latest", "to-current", "to-offset", "to-offset-above-the-end",
                                  "to-offset-one-partition", "shift-by-back", "shift-by-below-the-start",
                                  "shift-by-past-the-end", "to-datetime", "to-datetime-one-topic", "by-duration",
                                  "from-file"])
def test_our_plan_is_kafkas(capsys, world, oracle, name):
    args, _kafka_scope = strategies(world)[name]
    assert our_plan(capsys, world["job"], *args) == kafka_plan(oracle["resets"][name])


def test_the_times_fall_between_the_records(capsys, world, oracle):
    """The time strategies are not vacuous: T is after A's first 10 records and after all of B's."""
    a, b = world["a"], world["b"]
    assert kafka_plan(oracle["resets"]["to-datetime"]) == {TopicPartition(a, 0): 10, TopicPartition(a, 1): 10,
                                                           TopicPartition(b, 0): 5}


def test_our_export_is_kafkas(capsys, world, oracle, tmp_path):
    """``--export`` writes the CSV Kafka's tool writes (topic,partition,offset), so each reads the other's."""
    answer = oracle["export"]
    assert answer.returncode == 0, answer.stderr
    theirs = sorted(line for line in answer.stdout.splitlines() if re.fullmatch(r"[^,\s]+,\d+,\d+", line))
    ours = tmp_path / "ours.csv"
    done = cli(capsys, "reset", "--job-home", str(world["job"].home), "--to-earliest", "--topic", world["a"],
               "--export", str(ours))
    assert done.code == 0, done.err
    assert sorted(ours.read_text().split()) == theirs == [f"{world['a']},0,0", f"{world['a']},1,0"]


def test_verify_is_kafkas_describe(capsys, world, oracle):
    """Group offsets, log end offsets and lag: the group is at the checkpoint, so the job's lag is the group's."""
    answer = oracle["describe"]
    assert answer.returncode == 0, answer.stdout + answer.stderr
    theirs = {TopicPartition(r["TOPIC"], int(r["PARTITION"])): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]),
                                                               int(r["LAG"])) for r in table(answer.stdout)}
    verified = cli(capsys, "verify", "--job-home", str(world["job"].home), "--json")
    assert verified.code == 0, verified.out + verified.err
    ours = {TopicPartition(r["topic"], r["partition"]): (r["group_offset"], r["high"], r["lag"])
            for r in verified.json()["partitions"]}
    assert ours == theirs == {tp: (end, end, 0) for tp, end in world["ends"].items()}


# -- where the tools differ by design: a group that is not at the checkpoint ----------------------------------


@pytest.fixture(scope="module")
def apart(world):
    """Another group, committed for A:0 only (at 4), and Kafka's answers for it."""
    group = unique("oracle-apart")
    commit_group(world["bootstrap"], group, {TopicPartition(world["a"], 0): 4})
    every = ["--topic", world["a"], "--topic", world["b"]]
    with ThreadPoolExecutor(max_workers=3) as pool:
        asked = {"to-current": pool.submit(kafka_tool, world["bootstrap"], group, "--reset-offsets", "--to-current",
                                           *every, "--dry-run"),
                 "shift-by": pool.submit(kafka_tool, world["bootstrap"], group, "--reset-offsets", "--shift-by", "-2",
                                         *every, "--dry-run"),
                 "describe": pool.submit(kafka_tool, world["bootstrap"], group, "--describe")}
        return {"group": group, **{name: future.result() for name, future in asked.items()}}


def test_to_current_starts_from_the_checkpoint_kafkas_from_the_group(capsys, world, apart):
    a0, a1, b0 = TopicPartition(world["a"], 0), TopicPartition(world["a"], 1), TopicPartition(world["b"], 0)
    ours = our_plan(capsys, world["job"], "--to-current", "--group", apart["group"])
    assert ours == world["ends"], "ours: the checkpoint's position (what Spark resumes from)"
    assert kafka_plan(apart["to-current"]) == {a0: 4, a1: 15, b0: 5}, "Kafka's: the commit, else the log end"


def test_shift_by_starts_from_the_checkpoint_kafkas_needs_a_commit(capsys, world, apart):
    ours = our_plan(capsys, world["job"], "--shift-by", "-2", "--group", apart["group"])
    assert ours == {tp: end - 2 for tp, end in world["ends"].items()}, "ours: from the checkpoint"
    refused = apart["shift-by"]
    assert refused.returncode != 0 and "no current committed offset" in refused.stdout + refused.stderr


def test_verify_lag_is_the_jobs_kafkas_the_groups(capsys, world, apart):
    """Kafka lists only the partitions the group committed, with the group's lag; verify lists every partition,
    with the job's lag (from the checkpoint), and says where the group is behind or missing."""
    a0 = TopicPartition(world["a"], 0)
    theirs = {TopicPartition(r["TOPIC"], int(r["PARTITION"])): r for r in table(apart["describe"].stdout)}
    verified = cli(capsys, "verify", "--job-home", str(world["job"].home), "--group", apart["group"], "--json")
    rows = {TopicPartition(r["topic"], r["partition"]): r for r in verified.json()["partitions"]}
    assert set(theirs) == {a0}
    assert (rows[a0]["group_offset"], rows[a0]["high"]) == (int(theirs[a0]["CURRENT-OFFSET"]),
                                                             int(theirs[a0]["LOG-END-OFFSET"])) == (4, 15)
    assert int(theirs[a0]["LAG"]) == rows[a0]["high"] - rows[a0]["group_offset"] == 11
    assert rows[a0]["lag"] == 0 and rows[a0]["status"] == "GROUP_BEHIND"
    assert {str(tp): r["status"] for tp, r in rows.items() if tp != a0} == {
        f"{world['a']}:1": "MISSING_IN_GROUP", f"{world['b']}:0": "MISSING_IN_GROUP"}


# -- the last stable offset: a transaction left open ----------------------------------------------------------


@pytest.fixture(scope="module")
def open_transaction(world):
    """A topic with 5 committed records and then a transaction holding 3 more, left open: LSO 5, high watermark 8.
    A read_committed job stopped at the LSO, its group committed there."""
    bootstrap = world["bootstrap"]
    topic = create_topic(bootstrap, unique("oracle-lso"), partitions=1)
    produce_at(bootstrap, topic, 0, 5, int(time.time() * 1000))
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("oracle-txn"),
                         "transaction.timeout.ms": 300_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"open-{i}", partition=0)
    assert producer.flush(30) == 0
    group = unique("oracle-lso-group")
    commit_group(bootstrap, group, {TopicPartition(topic, 0): 5})
    try:
        yield {"topic": topic, "group": group, "describe": kafka_tool(bootstrap, group, "--describe")}
    finally:
        producer.abort_transaction(30)


def test_a_group_at_the_lso_is_not_behind(world, open_transaction):
    """Under read_committed, verify's end is the LSO: the job is caught up, its group in sync. Kafka's tool reads
    the high watermark (it has no isolation option), so its LAG counts the open transaction's records."""
    from airflow_kafka_stream.core.reset_scope import Scope
    from airflow_kafka_stream.core.reset_strategy import ResetStrategy
    from airflow_kafka_stream.core.verify import Status
    from airflow_kafka_stream.kafka.control_inputs import plan_job_reset, verify_job

    tp = TopicPartition(open_transaction["topic"], 0)
    config = {"bootstrap.servers": world["bootstrap"], "isolation.level": "read_committed"}
    now = datetime.now(UTC)
    result = verify_job(config, open_transaction["group"], {tp: 5}, [tp.topic], now=now,
                        last_batch_at=now - timedelta(hours=1), stall_after=timedelta(minutes=10))
    (row,) = result.partitions
    assert (row.observation.group_offset, row.observation.high, row.observation.lag, row.status) == (
        5, 5, 0, Status.OK), "caught up at the LSO: not behind, not stalled"
    (theirs,) = table(open_transaction["describe"].stdout)
    assert (int(theirs["CURRENT-OFFSET"]), int(theirs["LOG-END-OFFSET"]), int(theirs["LAG"])) == (5, 8, 3)

    # to-latest for such a job is the LSO: the high watermark would skip the open transaction's records if it
    # commits. Under read_uncommitted (Spark's default) it is the high watermark, as Kafka's tool says.
    planned = plan_job_reset(config, open_transaction["group"], {tp: 5}, [tp.topic], ResetStrategy.to_latest(),
                             Scope())
    assert planned.changes() == {tp: 5}
    uncommitted = {"bootstrap.servers": world["bootstrap"]}
    assert plan_job_reset(uncommitted, open_transaction["group"], {tp: 5}, [tp.topic], ResetStrategy.to_latest(),
                          Scope()).changes() == {tp: 8}
    loose = verify_job(uncommitted, open_transaction["group"], {tp: 5}, [tp.topic], now=now)
    assert (loose.partitions[0].observation.lag, loose.partitions[0].status) == (3, Status.OK)
