"""Savepoints through the CLI: create, list, show, validate, delete, prune, restore, and a real stop.

Restores are checked with real Spark: a query restarted on the restored
generation reads exactly from the savepoint's offsets (stateless), and a
streaming count continues from the savepoint's state (stateful, HDFS state
store). The stop test runs the example pipeline as a driver process and stops
it with the console script.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import read_status
from tests.conftest import ROOT
from tests.integration.cli_helpers import (
    Job,
    assert_unchanged,
    cli,
    cli_subprocess,
    consume,
    group_offsets,
    make_job,
    reads_from,
    snapshot,
    source_frame,
    starting_offsets,
    write_job_json,
)
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world(spark, kafka_bootstrap, tmp_path_factory):
    topic = create_topic(kafka_bootstrap, unique("cli-sp"), partitions=2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"v-{p}-{i}") for i in range(10)], partition=p)
    job = make_job(spark, kafka_bootstrap, tmp_path_factory.mktemp("cli-sp") / "home", {topic: 2})
    return {"job": job, "topic": topic, "spark": spark, "bootstrap": kafka_bootstrap}


def home_args(job: Job) -> list[str]:
    return ["--job-home", str(job.home)]


def new_batch(capsys, job: Job) -> None:
    """Append a batch at the current position, so the next savepoint gets its own batch id (and id)."""
    assert cli(capsys, "reset", *home_args(job), "--to-current", "--execute").code == 0


def create(capsys, job: Job) -> dict:
    result = cli(capsys, "savepoint", "create", *home_args(job), "--app-version", "2.0", "--json")
    assert result.code == 0, result.err
    return result.json()


def test_create_list_show_validate(capsys, world):
    job = world["job"]
    new_batch(capsys, job)
    position = read_position(job.checkpoint)
    made = create(capsys, job)
    assert made["batch_id"] == position.batch_id
    assert made["offsets"] == {world["topic"]: {"0": 10, "1": 10}}
    assert made["app_version"] == "2.0" and made["stateful"] is False and made["files"] >= 3

    listed = cli(capsys, "savepoint", "list", *home_args(job), "--json").json()
    assert made["id"] in [row["id"] for row in listed]
    table = cli(capsys, "savepoint", "list", *home_args(job))
    assert made["id"] in table.out and "APP VERSION" in table.out

    shown = cli(capsys, "savepoint", "show", made["id"], *home_args(job), "--json").json()
    assert shown == made
    valid = cli(capsys, "savepoint", "validate", made["id"], *home_args(job))
    assert valid.code == 0 and "checksums match" in valid.out

    record = job.history()[-1]
    assert (record["operation"], record["result"]) == ("savepoint-create", "ok")
    assert not (job.home / "lock").exists()
    history = cli(capsys, "history", *home_args(job))
    assert "savepoint-create" in history.out


def test_the_id_may_follow_the_options(capsys, world):
    """docs/savepoints.md writes `savepoint show --job-home H ID`: every action with an id takes that form."""
    job = world["job"]
    new_batch(capsys, job)
    made = create(capsys, job)
    shown = cli(capsys, "savepoint", "show", *home_args(job), made["id"], "--json")
    assert shown.code == 0, shown.err
    assert shown.json() == made
    valid = cli(capsys, "savepoint", "validate", *home_args(job), made["id"])
    assert valid.code == 0 and "checksums match" in valid.out, valid.err
    gone = cli(capsys, "savepoint", "delete", *home_args(job), made["id"])
    assert gone.code == 0, gone.err
    assert not (job.home / "savepoints" / made["id"]).exists()


def test_delete(capsys, world):
    job = world["job"]
    new_batch(capsys, job)
    made = create(capsys, job)
    gone = cli(capsys, "savepoint", "delete", made["id"], *home_args(job))
    assert gone.code == 0, gone.err
    assert not (job.home / "savepoints" / made["id"]).exists()
    assert made["id"] not in [r["id"] for r in cli(capsys, "savepoint", "list", *home_args(job), "--json").json()]
    assert cli(capsys, "savepoint", "show", made["id"], *home_args(job)).code == 2


def test_prune_keeps_the_newest(capsys, world):
    job = world["job"]
    for _ in range(2):
        new_batch(capsys, job)
        create(capsys, job)
    ids = [r["id"] for r in cli(capsys, "savepoint", "list", *home_args(job), "--json").json()]
    assert len(ids) >= 2
    newest = max(ids, key=lambda i: int(i.rsplit("-b", 1)[1]))
    pruned = cli(capsys, "savepoint", "prune", *home_args(job), "--keep-last", "1", "--json")
    assert pruned.code == 0, pruned.err
    assert sorted(pruned.json()["deleted"]) == sorted(set(ids) - {newest})
    assert [r["id"] for r in cli(capsys, "savepoint", "list", *home_args(job), "--json").json()] == [newest]


def test_restore_stateless_resumes_exactly_at_the_savepoint(capsys, world):
    job, topic = world["job"], world["topic"]
    new_batch(capsys, job)
    made = create(capsys, job)
    produce(world["bootstrap"], topic, [(None, "more") for _ in range(5)], partition=0)
    produce(world["bootstrap"], topic, [(None, "more") for _ in range(3)], partition=1)
    consume(world["spark"], job)
    assert job.position() == {TopicPartition(topic, 0): 15, TopicPartition(topic, 1): 13}
    generation = JobHome(str(job.home)).current_generation()

    restored = cli(capsys, "restore", *home_args(job), "--savepoint", made["id"], "--json")
    assert restored.code == 0, restored.err
    assert restored.json()["generation"] == generation + 1
    assert JobHome(str(job.home)).current_generation() == generation + 1
    assert job.position() == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}
    assert (job.history()[-1]["operation"], job.history()[-1]["result"]) == ("restore", "ok")

    rows = consume(world["spark"], job)
    assert reads_from(rows) == {TopicPartition(topic, 0): (10, 5), TopicPartition(topic, 1): (10, 3)}


def test_restore_drop_state_seeds_a_fresh_generation(capsys, world, tmp_path):
    job, topic = world["job"], world["topic"]
    new_batch(capsys, job)
    made = create(capsys, job)
    sink = tmp_path / "sink"
    (sink / "_spark_metadata").mkdir(parents=True)  # crafted: a file sink's batch log (real one: test_cli_refusals)
    (sink / "_spark_metadata" / "0").write_text("v1\n")
    before = snapshot(job)
    refused = cli(capsys, "restore", *home_args(job), "--savepoint", made["id"], "--drop-state",
                  "--sink-path", str(sink))
    assert refused.code == 2 and "_spark_metadata" in refused.err and "--allow-sink-batch-log" in refused.err
    assert_unchanged(job, before)

    done = cli(capsys, "restore", *home_args(job), "--savepoint", made["id"], "--drop-state", "--sink-path",
               str(sink), "--allow-sink-batch-log", "--json")
    assert done.code == 0, done.err
    generation = done.json()["generation"]
    info = json.loads((job.home / "generations" / f"{generation:04d}.json").read_text())
    assert info["start_offsets"] == made["offsets"]
    assert (info["reason"], info["from_savepoint"]) == ("restore-drop-state", made["id"])
    assert list((job.home / "checkpoints" / f"{generation:04d}").iterdir()) == []
    ends = {TopicPartition(topic, 0): 15, TopicPartition(topic, 1): 13}
    rows = consume(world["spark"], job)
    start = {TopicPartition(topic, int(p)): o for p, o in made["offsets"][topic].items()}
    assert reads_from(rows) == {tp: (start[tp], ends[tp] - start[tp]) for tp in ends if ends[tp] > start[tp]}


def counts(spark, job: Job) -> dict[int, int]:
    """Run a streaming count per partition (HDFS state store) once; the counts of its last batch."""
    got: dict[int, int] = {}

    def keep(df, _batch):
        got.update({r["partition"]: r["count"] for r in df.collect()})

    query = (source_frame(spark, job, starting_offsets(job)).groupBy("partition").count().writeStream
             .option("checkpointLocation", job.checkpoint).outputMode("complete").foreachBatch(keep)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    return got


def test_restore_stateful_counts_continue(capsys, spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("cli-sp-state"), partitions=2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, "x") for _ in range(6)], partition=p)
    home = tmp_path / "home"
    group = unique("cli-sp-state")
    write_job_json(home, kafka_bootstrap, group, [topic])
    job = Job(home, kafka_bootstrap, group, {topic: 2})
    JobHome(str(home)).new_generation("submit", start_offsets="earliest")
    assert counts(spark, job) == {0: 6, 1: 6}
    made = create(capsys, job)
    assert made["stateful"] is True and "HDFSBackedStateStoreProvider" in made["state_store_provider"]
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, "y") for _ in range(4)], partition=p)
    assert counts(spark, job) == {0: 10, 1: 10}
    assert cli(capsys, "restore", *home_args(job), "--savepoint", made["id"]).code == 0
    assert counts(spark, job) == {0: 10, 1: 10}, "state 6 from the savepoint + the 4 records after it"


def test_a_second_operation_is_refused_with_the_holder(capsys, world):
    job = world["job"]
    before = snapshot(job)
    history = len(job.history())
    with JobHome(str(job.home)).lock("restore", holder="bob@other-host:777"):
        result = cli(capsys, "savepoint", "create", *home_args(job))
        assert result.code == 2
        assert "locked by bob@other-host:777 for restore" in result.err
        assert "unlock" in result.err
        assert (job.home / "lock").exists(), "the holder's lock stays"
    assert not (job.home / "lock").exists()
    assert_unchanged(job, before)
    refused = job.history()[history:]  # recorded, so whoever asked finds why in the history
    assert [(r["operation"], r["result"]) for r in refused] == [("savepoint-create", "refused")], refused
    assert "locked by bob@other-host:777 for restore" in refused[0]["error"]


def test_unlock_releases_a_stale_lock(capsys, world):
    job = world["job"]
    (job.home / "lock").write_text(json.dumps({"holder": "dead@host:1", "operation": "reset"}))
    result = cli(capsys, "unlock", *home_args(job))
    assert result.code == 0 and "dead@host:1" in result.out
    assert not (job.home / "lock").exists()
    assert cli(capsys, "unlock", *home_args(job)).out.strip() == "the job home was not locked"


def test_stop_with_savepoint(kafka_bootstrap, tmp_path):
    """The example pipeline as a driver process; `stop --savepoint` from the console script."""
    topic = create_topic(kafka_bootstrap, unique("cli-stop"), partitions=2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, json.dumps({"id": f"{p}-{i}", "key": "k", "amount": i}))
                                         for i in range(8)], partition=p)
    home, group = tmp_path / "home", unique("cli-stop")
    log_path = tmp_path / "driver.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "airflow_kafka_stream.jobs.example_pipeline", "--home", str(home),
             "--bootstrap", kafka_bootstrap, "--topic", topic, "--group", group, "--output", str(tmp_path / "out"),
             "--heartbeat-seconds", "3", "--cores", "2", "--trigger-interval", "1 second"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wanted = {topic: {"0": 8, "1": 8}}
        deadline = time.monotonic() + 120
        while True:
            status = read_status(str(home)) or {}
            if status.get("state") == "RUNNING" and status.get("last_offsets") == wanted:
                break
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, f"job never committed {wanted}: {status}"
            time.sleep(0.5)
        stopped = cli_subprocess("stop", "--job-home", str(home), "--savepoint", "--timeout", "120", "--json",
                                 timeout=150)
        assert stopped.returncode == 0, stopped.stderr
        result = json.loads(stopped.stdout)
        assert proc.wait(60) == 0, log_path.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert result["was_running"] is True and result["state"] == "STOPPED"
    assert read_status(str(home))["state"] == "STOPPED"
    savepoint = result["savepoint"]
    job_home = JobHome(str(home))
    position = read_position(job_home.checkpoint_url()).source_offsets(0)
    ends = {TopicPartition(topic, 0): 8, TopicPartition(topic, 1): 8}
    assert savepoint["offsets"] == wanted
    assert position == ends
    assert group_offsets(kafka_bootstrap, group, list(ends)) == ends
    assert savepoint["batch_id"] == read_position(job_home.checkpoint_url()).batch_id
    assert [(r["operation"], r["result"]) for r in job_home.history()][-1] == ("stop", "ok")
