"""A job that reads with Spark's own Kafka connector (``format("kafka")``) through the command line's lifecycle.

The example pipeline with ``--source kafka``, fed all along (a drain never waits for an idle topic): submit
(group commits after each batch, verify against the checkpoint), a live savepoint, a drop-state upgrade through
a warm standby (its rehearsal bounded through seeded checkpoints, the new generation's start seeded), upgrades
that move the job to this project's source and back on the same checkpoint (the way back through the example
stream_upgrade DAG, ``dag.test()``), and a stop with a savepoint under load that ends after the running batch.
Every record up to the committed offsets is in the output exactly once, and the secret of ``--command-config`` is
nowhere. The command line's and Airflow's lifecycle on this source (submit, standby upgrade, ``kill -9`` and the
watchdog, stop) is test_front_ends_agree's, run on both sources.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.airflow.test_airflow_submit import all_process_arguments, kill_drivers
from tests.integration.airflow.test_airflow_upgrade import APPS, Feeder, example_dag, output_ids
from tests.integration.cli_helpers import FAST_UPGRADE, run, wait_running
from tests.integration.lifecycle.test_upgrade_rehearsal import newest_totals
from tests.kafka_utils import committed, create_topic, unique

pytestmark = pytest.mark.integration

PARTITIONS = 2
FAST = {"health_batches": 1, "health_window_seconds": 10, "health_startup_seconds": 90, "stop_timeout_seconds": 60,
        "health_timeout_seconds": 180}
SECRET = "pw-" + "Qv8Rn"


def events_before(bootstrap: str, topic: str, ends: dict[int, int]) -> list[dict]:
    """The events before ``ends`` (per partition), read from the topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ids"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
    wanted, found = sum(ends.values()), []
    deadline = time.monotonic() + 60
    while len(found) < wanted and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and not message.error() and message.offset() < ends[message.partition()]:
            found.append(json.loads(message.value()))
    consumer.close()
    return found


def test_a_job_on_sparks_connector_goes_through_the_lifecycle_and_moves_between_sources(tmp_path: Path,
                                                                                       kafka_bootstrap, airflow_db,
                                                                                       monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("spark-kafka-life"), PARTITIONS)
    home, output, config = tmp_path / "home", tmp_path / "out", tmp_path / "client.properties"
    config.write_text(f"bootstrap.servers={kafka_bootstrap}\nsasl.username=svc-stream\nsasl.password={SECRET}\n")
    job = ("--job-home", str(home), "--command-config", str(config))
    group = unique("spark-kafka-life")
    feeder = Feeder(kafka_bootstrap, topic, interval=1.0)  # always records in flight: drains happen under load
    feeder.start()
    try:
        code, out, err = run("submit", *job, "--topic", topic, "--group", group, "--output", str(output),
                             "--master", "local[2]", "--source", "kafka", "--app-version", "1", "--json")
        assert code == 0, err
        first = wait_running(home, "1")
        assert first["read_placement"]["reason"].startswith("Spark's own Kafka connector"), first["read_placement"]
        code, out, err = run("status", "--job-home", str(home))
        assert "reads batches   Spark's own Kafka connector" in out, out
        assert "--source kafka" in " ".join(JobHome(str(home)).submission("1")["application_args"])

        code, out, err = run("verify", *job, "--json")
        assert code == 0, out + err  # the group holds each batch's offsets: what the checkpoint holds

        code, out, err = run("savepoint", "create", "--job-home", str(home), "--json")
        assert code == 0, out + err  # a live savepoint of the running connector job
        assert json.loads(out)["id"]

        # Through a warm standby, from the offsets alone: the rehearsal reads a stretch bounded in its checkpoints,
        # and the new generation's start is seeded where the connector looks first.
        code, out, err = run("upgrade", *job, "--app-version", "2", "--drop-state", "--json", *FAST_UPGRADE)
        assert code == 0, out + err
        through = json.loads(out)
        assert through["upgraded"] is True, through
        assert "standby-go" in [r["operation"] for r in JobHome(str(home)).history()], "taken over by the standby"
        assert (through["rehearsal"]["verdict"], through["rehearsal"]["with_state"]) == ("compatible", False), through
        second = wait_running(home, "2")
        assert second["generation"] == first["generation"] + 1
        start = JobHome(str(home)).generation_info(second["generation"])["start_offsets"][topic]
        assert sum(start.values()) > 0, "the new generation starts where the old one stopped, not at the beginning"

        code, out, err = run("upgrade", *job, "--app-version", "3", "--source", "kafka_stream", "--no-standby",
                             "--json", *FAST_UPGRADE)
        assert code == 0, out + err
        assert json.loads(out)["upgraded"] is True
        wait_running(home, "3")
        assert "--source kafka_stream" in " ".join(JobHome(str(home)).submission("3")["application_args"])

        set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
        set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
        back = run_dag("stream_upgrade", path=example_dag("stream_upgrade"), conf={
            "job_home": str(home), "new_version": "4", "topics": [topic], "group": group, "output_path": str(output),
            "source": "kafka", "standby": False, **FAST})
        assert back.tasks["upgrade.outcome"] == "success", back.tasks
        wait_running(home, "4")
        assert "--source kafka" in " ".join(JobHome(str(home)).submission("4")["application_args"])
        assert JobHome(str(home)).current_generation() == second["generation"], "the moves keep the checkpoint"

        code, out, err = run("stop", "--job-home", str(home), "--savepoint", "--json")
        assert code == 0, out + err
        stopped = json.loads(out)
        assert stopped["state"] == "STOPPED" and stopped["savepoint"]["id"], stopped
    finally:
        feeder.stop()
        kill_drivers(home)  # after a failure: no driver left writing into the next run's home

    group_ends = committed(kafka_bootstrap, group, topic, PARTITIONS)
    last = JobHome(str(home)).status()["last_offsets"]
    assert {str(p): o for p, o in group_ends.items()} == last[topic], "the group holds the last batch's offsets"
    written = Counter(output_ids(output))
    assert [i for i, n in written.items() if n > 1] == [], "a record written twice"
    assert sorted(written) == sorted(e["id"] for e in events_before(kafka_bootstrap, topic, group_ends)), (
        "a record lost or extra")
    assert sum(group_ends.values()) > 0
    assert SECRET.encode() not in all_process_arguments()
    for path in (*home.rglob("*"), *output.rglob("*")):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), f"the secret is in {path}"


def example_args(example: tuple[str, ...], version: str) -> list[str]:
    """The example pipeline's arguments with another ``--app-version``."""
    found = list(example)
    found[found.index("--app-version") + 1] = version
    return found


def test_a_stateful_job_moves_between_sparks_connector_and_ours_with_its_state(tmp_path: Path, kafka_bootstrap):
    """The per-key running totals (Spark's state store) carry over the moves, to this project's source and back:
    each key's total is the sum of its records up to the committed offsets, each counted once."""
    topic = create_topic(kafka_bootstrap, unique("spark-kafka-totals"), PARTITIONS)
    home, output, group = tmp_path / "home", tmp_path / "out", unique("spark-kafka-totals")
    job = ("--job-home", str(home), "--bootstrap-server", kafka_bootstrap)
    example = ("--home", str(home), "--bootstrap", kafka_bootstrap, "--topic", topic, "--group", group, "--output",
               str(output), "--app-version", "1", "--totals", "--source", "kafka")
    feeder = Feeder(kafka_bootstrap, topic, interval=1.0)
    feeder.start()
    try:
        code, out, err = run("submit", *job, "--master", "local[2]", "--app-version", "1", "--json", "--", *example)
        assert code == 0, err
        wait_running(home, "1")
        code, out, err = run("upgrade", *job, "--app-version", "2", "--source", "kafka_stream", "--no-standby",
                             "--json", *FAST_UPGRADE)
        assert code == 0, out + err
        wait_running(home, "2")
        # A version whose state no longer fits, rehearsed on the connector's copy of the job's state and then
        # from its offsets alone: refused before the stop, the running version untouched.
        running = JobHome(str(home)).status()
        code, out, err = run("upgrade", *job, "--app-version", "3", "--application", str(APPS / "totals_key_long.py"),
                             "--json", *FAST_UPGRADE, "--", *example_args(example, "3"))
        assert code != 0 and "failed before any downtime" in err and "needs drop_state" in err, out + err
        assert (JobHome(str(home)).status()["pid"], JobHome(str(home)).spec()["version"]) == (running["pid"], "2")
        code, out, err = run("upgrade", *job, "--app-version", "3", "--source", "kafka", "--json", *FAST_UPGRADE)
        assert code == 0, out + err
        moved = json.loads(out)
        assert (moved["rehearsal"]["verdict"], moved["rehearsal"]["with_state"]) == ("compatible", True), moved
        assert moved["rehearsal"]["records"] > 0, "the rehearsal ran the job's last batch and newer records"
        wait_running(home, "3")
        code, out, err = run("stop", "--job-home", str(home), "--savepoint", "--json")
        assert code == 0, out + err
    finally:
        feeder.stop()
        kill_drivers(home)

    ends = committed(kafka_bootstrap, group, topic, PARTITIONS)
    expected: dict = {}
    for event in events_before(kafka_bootstrap, topic, ends):
        amount, count = expected.get(event["key"], (0.0, 0))
        expected[event["key"]] = (amount + event["amount"], count + 1)
    assert newest_totals(output, 1) == expected


def test_a_job_on_sparks_connector_without_its_jar_is_refused_at_submit_naming_the_jar(tmp_path: Path,
                                                                                      kafka_bootstrap):
    topic = create_topic(kafka_bootstrap, unique("spark-kafka-nojar"), 1)
    home = tmp_path / "home"
    code, out, err = run("submit", "--job-home", str(home), "--bootstrap-server", kafka_bootstrap, "--topic", topic,
                         "--group", unique("nojar"), "--output", str(tmp_path / "out"), "--master", "local[1]",
                         "--source", "kafka", "--kafka-connector", "provided", "--app-version", "1",
                         "--timeout", "120")
    kill_drivers(home)
    assert code != 0, out + err
    assert "spark-sql-kafka-0-10 jar" in err and "kafka_connector auto or bundled" in err, err
    assert JobHome(str(home)).status()["state"] == "FAILED"
