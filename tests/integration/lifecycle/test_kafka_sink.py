"""Exactly once from Kafka to Kafka: the example pipeline with ``--output-topic`` (the transactional sink), killed
with ``kill -9`` at each point of a batch while a producer keeps feeding it, reads back exactly once.

The points (the sink's test hook ``AIRFLOW_KAFKA_STREAM_TEST_SINK_PAUSE`` holds the driver there until it is
killed): before the batch writes anything; inside its Kafka transaction, after its first record was sent; after
the Kafka commit but before Spark's commit of the batch (the batch is re-run and must write nothing); after
Spark's commit but before the group commit. One job goes through all four crashes and restarts; a
``read_committed`` consumer then sees every input record once, in order per key, and no transaction is open.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from airflow_kafka_stream.core.batch_marker import transactional_id
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.kafka.transactions import stable_and_high
from airflow_kafka_stream.runtime.kafka_sink import PAUSE_ENV, PAUSE_FILE_ENV, TransactionalKafkaSink
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.integration.cli_helpers import cli_subprocess
from tests.integration.lifecycle.test_exactly_once import Pipeline, pipelines  # noqa: F401 - a fixture
from tests.kafka_transactions import transaction_state
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

PARTITIONS = 2
KEYS = 4


def skipped_batches(pipeline: Pipeline) -> int:
    return ((pipeline.status().get("kafka_sink") or {}).get("transactions") or {}).get("skipped", 0)


class NumberedFeed(threading.Thread):
    """Produces records numbered from 0, ten every half second, keyed by number modulo KEYS, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.sent, self.done = bootstrap, topic, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            produce(self.bootstrap, self.topic, [(f"k{i % KEYS}", json.dumps({
                "id": f"n{i}", "key": f"k{i % KEYS}", "ts": "2026-12-04T10:00:00Z", "amount": i}))
                for i in range(self.sent, self.sent + 10)])
            self.sent += 10
            self.done.wait(0.5)

    def stop(self) -> int:
        self.done.set()
        self.join(30)
        return self.sent


def read_topic(bootstrap: str, topic: str, committed_only: bool = True, partitions: int = PARTITIONS) -> list[dict]:
    """Every record of ``topic`` a consumer sees (``read_committed`` or ``read_uncommitted``), in partition order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed_only else "read_uncommitted"})
    try:
        ends = {}
        for partition in range(partitions):
            _low, high = consumer.get_watermark_offsets(KafkaPartition(topic, partition), 10)
            ends[partition] = high
        consumer.assign([KafkaPartition(topic, p, 0) for p in range(partitions)])
        rows, deadline, idle = [], time.monotonic() + 60, 0
        while time.monotonic() < deadline and idle < 6:
            message = consumer.poll(0.5)
            if message is None:
                idle += 1
                continue
            idle = 0
            if message.error() is None:
                rows.append({"partition": message.partition(), "offset": message.offset(),
                             **json.loads(message.value())})
        return rows
    finally:
        consumer.close()


def open_partitions(bootstrap: str, topic: str) -> list[int]:
    """Partitions of ``topic`` whose last stable offset is behind the high watermark: a transaction is open there."""
    return [p for p, (stable, high) in stable_and_high({"bootstrap.servers": bootstrap}, topic).items()
            if stable < high]


def stranger_holds_the_output_while_the_job_is_down(bootstrap: str, output: str, home: str, writer: str) -> None:
    """Another producer's transaction left open on the job's output: verify names that producer, not the job."""
    stranger = f"{unique('stranger')}.tx"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": stranger})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(output, b"not the job's", partition=1)
    producer.flush(30)
    try:
        checked = cli_subprocess("verify", "--job-home", home)
        assert checked.returncode == 1, checked.stdout
        assert "another producer, producer" in checked.stdout and f"transactional id {stranger}), Ongoing" \
            in checked.stdout, checked.stdout
        found = json.loads(cli_subprocess("verify", "--job-home", home, "--json").stdout)["output"]
        assert [(h["partition"], h["transactional_id"], h["job_writer"]) for h in found["holders"]] == [
            (1, stranger, False)], found
        assert writer not in json.dumps(found["holders"])
    finally:
        producer.abort_transaction(30)
    assert open_partitions(bootstrap, output) == []


def test_kill_9_at_every_point_of_a_batch_leaves_the_output_exactly_once(kafka_bootstrap, tmp_path,
                                                                       pipelines):  # noqa: F811 - the fixture
    source = create_topic(kafka_bootstrap, unique("eos-in"), PARTITIONS)
    output = create_topic(kafka_bootstrap, unique("eos-out"), PARTITIONS)
    group = unique("eos-group")
    pause_file = tmp_path / "paused"
    feed = NumberedFeed(kafka_bootstrap, source)
    feed.start()

    def run(point: str | None) -> Pipeline:
        env = {**os.environ, PAUSE_ENV: point, PAUSE_FILE_ENV: str(pause_file)} if point else None
        pipeline = Pipeline(tmp_path, kafka_bootstrap, source, group, "--output-topic", output,
                            "--max-offsets-per-trigger", "30", env=env)
        pipelines.append(pipeline)
        return pipeline

    inside_a_transaction = False
    writer = transactional_id(Path(tmp_path / "home").name, output)  # the example's job is named by its home
    try:
        for point in ("before-write", "writing", "committed", "spark-committed"):
            pause_file.unlink(missing_ok=True)
            pipeline = run(point)
            pipeline.wait_for(pause_file.exists, f"the driver to stop at {point}", timeout=180)
            if point == "spark-committed":  # the restart re-ran the batch the last crash had committed to Kafka
                pipeline.wait_for(lambda p=pipeline: skipped_batches(p) >= 1, "the re-run batch to be skipped by the sink",
                                  timeout=30)
            pipeline.kill()
            if point == "writing":
                # The crash did hit inside a transaction: its records are in the log, and read_uncommitted sees them;
                # Kafka's own tool (kafka-transactions.sh) shows the job's transaction open.
                inside_a_transaction = bool(open_partitions(kafka_bootstrap, output))
                assert transaction_state(kafka_bootstrap, writer)["TransactionState"] == "Ongoing"
                seen_all = len(read_topic(kafka_bootstrap, output, committed_only=False))
                assert seen_all > len(read_topic(kafka_bootstrap, output)), "no uncommitted record was written"
                # verify names the open transaction on the output of a job that is not running, and the writer
                # Kafka's tool found it under.
                checked = cli_subprocess("verify", "--job-home", pipeline.home, "--json")
                found = json.loads(checked.stdout)["output"]
                assert checked.returncode == 1 and found["problem"] and found["open_partitions"], found
                assert found["transactional_id"] == writer, found
                # ... and the broker's answer on whose it is: the job's writer, open, not hanging
                holders = {h["partition"]: h for h in found["holders"]}
                assert sorted(holders) == found["open_partitions"], found
                assert all(h["job_writer"] and h["transactional_id"] == writer and h["state"] == "Ongoing"
                           and not h["hanging"] and h["open_for_ms"] < h["timeout_ms"] == 60_000
                           for h in holders.values()), found
        assert inside_a_transaction
        last = run(None)
        sent = feed.stop()
        last.wait_for(lambda: (last.status().get("records_this_run") or 0) > 0 and
                      sum(int(o) for p in (last.status().get("last_offsets") or {}).values() for o in p.values())
                      >= sent, "the job to read everything sent", timeout=240)
        last.request_stop()
        assert last.wait_exit() == 0, last.log_tail()
    finally:
        feed.stop()

    rows = read_topic(kafka_bootstrap, output)
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)) == sent, (len(ids), len(set(ids)), sent)
    for key in range(KEYS):  # one key's records are in one partition, in the order they were read
        numbers = [int(row["id"][1:]) for row in rows if row["key"] == f"k{key}"]
        assert numbers == sorted(numbers), f"k{key} out of order"
    assert open_partitions(kafka_bootstrap, output) == [], "a transaction is left open"
    assert transaction_state(kafka_bootstrap, writer)["TransactionState"] in ("CompleteCommit", "Empty")
    checked = cli_subprocess("verify", "--job-home", last.home, "--json")
    assert json.loads(checked.stdout)["output"]["open_partitions"] == [], checked.stdout
    assert json.loads(checked.stdout)["output"]["holders"] is None, "nothing held, nobody asked"
    stranger_holds_the_output_while_the_job_is_down(kafka_bootstrap, output, last.home, writer)
    sink = last.status()["kafka_sink"]
    assert sink["topic"] == output and sink["transactions"]["fenced"] == 0, sink
    assert sink["transactional_id"] == writer, "the writer Kafka described is the job's"
    assert json.loads((Path(last.home) / "job.json").read_text())["sink"]["kind"] == "kafka"


def test_an_upgrade_a_stop_a_reset_and_a_restore_write_what_they_say(kafka_bootstrap, tmp_path):
    """From the terminal, as a user runs it: version 1 submitted with ``--output-topic``, upgraded to version 2
    through a warm standby (whose writes fence version 1's) while records arrive, a live savepoint taken, stopped
    with a savepoint, reset back 20 records a partition and started again. The output holds every record once, but
    those the reset's plan said are read again, which it holds twice: exactly that many. Then the live savepoint is
    restored (its outcome counts the records read again) and version 3 starts with ``--skip-replays``: it reads
    them all again and writes none of them, skipping exactly the count the restore announced."""
    from tests.integration.cli_helpers import FAST_UPGRADE, run, wait_running
    from tests.integration.lifecycle.test_front_ends_agree import drained

    source = create_topic(kafka_bootstrap, unique("eos-life-in"), PARTITIONS)
    output = create_topic(kafka_bootstrap, unique("eos-life-out"), PARTITIONS)
    home = tmp_path / "home"
    job = ("--job-home", str(home), "--bootstrap-server", kafka_bootstrap)
    group = unique("eos-life")
    feed = NumberedFeed(kafka_bootstrap, source)
    feed.start()
    try:
        code, _out, err = run("submit", *job, "--topic", source, "--group", group, "--output-topic",
                              output, "--master", "local[2]", "--app-version", "1", "--json")
        assert code == 0, err
        first = wait_running(home, "1")
        code, out, err = run("upgrade", *job, "--app-version", "2", "--json", *FAST_UPGRADE)
        assert code == 0 and json.loads(out)["upgraded"], out + err
        upgraded = wait_running(home, "2", pid_not=first["pid"])
        assert upgraded["kafka_sink"]["transactional_id"] == first["kafka_sink"]["transactional_id"]
        code, out, err = run("savepoint", "create", "--job-home", str(home), "--json")
        assert code == 0, out + err
        live = json.loads(out)["id"]
        time.sleep(3)  # records keep arriving after the live savepoint: a restore of it reads them again
    finally:
        sent = feed.stop()
    drained(home, kafka_bootstrap, source)
    code, out, err = run("stop", "--job-home", str(home), "--savepoint", "--json")
    assert code == 0 and json.loads(out)["state"] == "STOPPED", out + err
    assert len(read_topic(kafka_bootstrap, output)) == sent, "exactly once through the upgrade"
    assert open_partitions(kafka_bootstrap, output) == [], "the stop left a transaction open"

    code, out, err = run("reset", *job, "--shift-by", "-20", "--execute", "--json")
    assert code == 0, out + err
    reset = json.loads(out)
    again = reset["plan"]["records_read_again"]  # 20 a partition, but what a partition has less of
    assert again == sum(min(20, p["checkpoint_offset"]) for p in reset["plan"]["partitions"]) > 0, reset["plan"]
    assert "batches a rewind replays are written to the topic again" in reset["sink"]
    code, _out, err = run("submit", "--job-home", str(home), "--app-version", "2", "--from-submission", "--json")
    assert code == 0, err
    drained(home, kafka_bootstrap, source)
    code, out, err = run("stop", "--job-home", str(home), "--json")
    assert code == 0, out + err

    ids = [row["id"] for row in read_topic(kafka_bootstrap, output)]
    assert set(ids) == {f"n{i}" for i in range(sent)}
    assert len(ids) - len(set(ids)) == again, "the replay wrote exactly the records the plan announced, once more"

    code, out, err = run("restore", *job, "--savepoint", live, "--json")
    assert code == 0, out + err
    read_again = json.loads(out)["records_read_again"]
    assert read_again > 0 and "written to the topic again" in json.loads(out)["sink"], out
    code, _out, err = run("submit", *job, "--topic", source, "--group", group, "--output-topic", output,
                          "--skip-replays", "--master", "local[2]", "--app-version", "3", "--json")
    assert code == 0, err
    drained(home, kafka_bootstrap, source)
    wait_running(home, "3")
    deadline = time.monotonic() + 30  # the heartbeat after the last batch shows its count
    while (sink := JobHome(str(home)).status()["kafka_sink"])["replays_skipped_this_run"] < read_again:
        assert time.monotonic() < deadline, sink
        time.sleep(1)
    assert sink["skip_replays"] and sink["replays_skipped_this_run"] == read_again, sink
    code, out, err = run("stop", "--job-home", str(home), "--json")
    assert code == 0, out + err
    assert json.loads((home / "job.json").read_text())["sink"]["skip_replays"] is True
    assert len(read_topic(kafka_bootstrap, output)) == len(ids), "the restore's replay wrote nothing again"


def test_a_cluster_whose_acls_refuse_the_sinks_transactional_id_is_named_at_once(kafka_bootstrap, tmp_path):
    """The test broker runs Kafka's own authorizer, open until an ACL names a resource: denying the job's
    transactional id (a secured cluster without the grant) makes the sink's start fail at once, naming the id, what
    it needs and the marker group (a driver opens its sink in its first batch, which fails with this), and a
    submit of the job refuses before it launches a driver. Another job's sink on the same cluster starts."""
    output = create_topic(kafka_bootstrap, unique("eos-acl-out"), 1)
    refused = TransactionalKafkaSink({"bootstrap.servers": kafka_bootstrap}, output, job_name=unique("refused"),
                                     group="g", generation=lambda: 1)
    rule = (ResourceType.TRANSACTIONAL_ID, refused.transactional_id, ResourcePatternType.LITERAL, "User:ANONYMOUS",
            "*", AclOperation.WRITE, AclPermissionType.DENY)
    deny = AclBinding(*rule)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_acls([deny]).values():
        future.result(30)
    try:
        with pytest.raises(StreamError) as failed:
            refused.open()
        said = str(failed.value)
        assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in said and refused.transactional_id in said, said
        assert "WRITE and DESCRIBE on transactional id" in said and "g.sink-markers" in said, said
        allowed = TransactionalKafkaSink({"bootstrap.servers": kafka_bootstrap}, output, job_name=unique("allowed"),
                                         group="g", generation=lambda: 1)
        allowed.open()
        assert allowed.close(10)
        # A submit of that job is refused before its driver is launched, naming the id and what it needs.
        home = tmp_path / refused.job_name  # the example pipeline names its job by its home
        source = create_topic(kafka_bootstrap, unique("eos-acl-in"), 1)
        done = cli_subprocess("submit", "--job-home", home, "--bootstrap-server", kafka_bootstrap, "--app-version",
                              "1", "--topic", source, "--group", "g", "--output-topic", output)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "nothing was launched" in done.stderr and refused.transactional_id in done.stderr, done.stderr
        assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in done.stderr, done.stderr
        assert JobHome(str(home)).launch_record() is None, "no driver was launched"
        assert not home.exists(), "a refused first submit leaves no job home behind"
    finally:
        for future in admin.delete_acls([AclBindingFilter(*rule)]).values():
            future.result(30)


def test_read_with_sparks_own_connector_the_sink_writes_each_record_once_and_keeps_its_replay_marks(
        kafka_bootstrap, tmp_path, pipelines):  # noqa: F811 - the fixture
    """The example pipeline reading with ``--source kafka`` (Spark's ``format("kafka")``) and ``--skip-replays``:
    the sink takes the connector's ``topic``, ``partition`` and ``offset`` columns as each row's input record."""
    source = create_topic(kafka_bootstrap, unique("eos-connector-in"), PARTITIONS)
    output = create_topic(kafka_bootstrap, unique("eos-connector-out"), PARTITIONS)
    produce(kafka_bootstrap, source, [(f"k{i % KEYS}", json.dumps({
        "id": f"n{i}", "key": f"k{i % KEYS}", "ts": "2026-12-04T10:00:00Z", "amount": i})) for i in range(200)])
    pipeline = Pipeline(tmp_path, kafka_bootstrap, source, unique("eos-connector"), "--source", "kafka",
                        "--output-topic", output, "--skip-replays", "--max-offsets-per-trigger", "50",
                        "--available-now")
    pipelines.append(pipeline)
    assert pipeline.wait_exit(240) == 0, pipeline.log_tail()
    assert sorted(row["id"] for row in read_topic(kafka_bootstrap, output)) == sorted(f"n{i}" for i in range(200))
    assert open_partitions(kafka_bootstrap, output) == []
    sink = pipeline.status()["kafka_sink"]
    assert sink["skip_replays"] and sink["transactions"]["committed"] >= 4, sink
