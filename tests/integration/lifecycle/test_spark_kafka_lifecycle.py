"""A stateful job that reads with Spark's own Kafka connector (``format("kafka")``) through its lifecycle.

The example pipeline's per-key running totals with ``--source kafka``, fed all along (a drain never waits for an
idle topic): submit (group commits after each batch, verify against the checkpoint), a live savepoint, a version
whose state no longer fits refused by its warm standby before the stop (the connector's rehearsal bounded through
its checkpoints), a move to this project's source and back on the same checkpoint (the way back through the example
stream_upgrade DAG, ``dag.test()``, and the connector's standby with the state), a drop-state upgrade through the
standby (the new generation's start seeded where the connector looks first), and a stop with a savepoint under
load. Each generation's per-key totals are exactly the sums of its records up to the committed offsets (a record
lost or counted twice changes its key's count), and the secret of ``--command-config`` is nowhere. The command
line's and Airflow's lifecycle on this source, record by record (submit, standby upgrade, ``kill -9`` and the
watchdog, stop), is test_front_ends_agree's, run on both sources.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.airflow.test_airflow_submit import all_process_arguments, kill_drivers
from tests.integration.airflow.test_airflow_upgrade import APPS, Feeder, example_dag
from tests.integration.cli_helpers import FAST_UPGRADE, run, wait_running
from tests.integration.lifecycle.test_upgrade_rehearsal import newest_totals
from tests.kafka_utils import committed, create_topic, unique

pytestmark = pytest.mark.integration

PARTITIONS = 2
FAST = {"health_batches": 1, "health_window_seconds": 10, "health_startup_seconds": 180, "stop_timeout_seconds": 60,
        "health_timeout_seconds": 180}
SECRET = "pw-" + "Qv8Rn"


def events_between(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int]) -> list[dict]:
    """The events from ``starts`` up to ``ends`` (per partition), read from the topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ids"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p, end in ends.items() if end > starts.get(p, 0)])
    wanted, found = sum(end - starts.get(p, 0) for p, end in ends.items()), []
    deadline = time.monotonic() + 60
    while len(found) < wanted and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and not message.error() and message.offset() < ends[message.partition()]:
            found.append(json.loads(message.value()))
    consumer.close()
    return found


def totals_of(events: list[dict]) -> dict:
    """Per key: (sum of amounts, count), as the example pipeline's ``--totals`` job keeps them."""
    found: dict = {}
    for event in events:
        amount, count = found.get(event["key"], (0.0, 0))
        found[event["key"]] = (amount + event["amount"], count + 1)
    return found


def example_args(example: tuple[str, ...], version: str) -> list[str]:
    """The example pipeline's arguments with another ``--app-version``."""
    found = list(example)
    found[found.index("--app-version") + 1] = version
    return found


def test_a_stateful_job_on_sparks_connector_goes_through_the_lifecycle_and_moves_between_sources(
        tmp_path: Path, kafka_bootstrap, airflow_db, monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("spark-kafka-life"), PARTITIONS)
    home, output, config = tmp_path / "home", tmp_path / "out", tmp_path / "client.properties"
    config.write_text(f"bootstrap.servers={kafka_bootstrap}\nsasl.username=svc-stream\nsasl.password={SECRET}\n")
    job = ("--job-home", str(home), "--command-config", str(config))
    group = unique("spark-kafka-life")
    example = ("--home", str(home), "--bootstrap", kafka_bootstrap, "--topic", topic, "--group", group, "--output",
               str(output), "--app-version", "1", "--totals", "--source", "kafka")
    # A burst every 2 s: records in flight at every transition (a batch here takes 1-2 s), at half the CPU of 1 s.
    feeder = Feeder(kafka_bootstrap, topic, interval=2.0)
    feeder.start()
    try:
        code, out, err = run("submit", *job, "--master", "local[2]", "--app-version", "1", "--json", "--", *example)
        assert code == 0, err
        first = wait_running(home, "1")
        assert first["read_placement"]["reason"].startswith("Spark's own Kafka connector"), first["read_placement"]
        code, out, err = run("status", "--job-home", str(home))
        assert "reads batches   Spark's own Kafka connector" in out, out
        code, out, err = run("verify", *job, "--json")
        assert code == 0, out + err  # the group holds each batch's offsets: what the checkpoint holds
        code, out, err = run("savepoint", "create", "--job-home", str(home), "--json")
        assert code == 0, out + err  # a live savepoint of the running connector job
        assert json.loads(out)["id"]

        # A version whose state no longer fits, rehearsed by its standby on the connector's copy of the job's state
        # and then from its offsets alone: refused before the stop, the running version untouched.
        code, out, err = run("upgrade", *job, "--app-version", "2", "--application", str(APPS / "totals_key_long.py"),
                             "--json", *FAST_UPGRADE, "--", *example_args(example, "2"))
        assert code != 0 and "failed before any downtime" in err and "needs drop_state" in err, out + err
        assert (JobHome(str(home)).status()["pid"], JobHome(str(home)).spec()["version"]) == (first["pid"], "1")

        code, out, err = run("upgrade", *job, "--app-version", "2", "--source", "kafka_stream", "--no-standby",
                             "--json", *FAST_UPGRADE)
        assert code == 0, out + err
        wait_running(home, "2")
        assert "--source kafka_stream" in " ".join(JobHome(str(home)).submission("2")["application_args"])

        # Back to the connector through the example DAG and a warm standby that keeps the state.
        set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
        set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
        back = run_dag("stream_upgrade", path=example_dag("stream_upgrade"),
                       conf={"job_home": str(home), "new_version": "3", "source": "kafka", **FAST})
        assert back.tasks["upgrade.outcome"] == "success", back.tasks
        wait_running(home, "3")
        assert "--source kafka" in " ".join(JobHome(str(home)).submission("3")["application_args"])
        rehearsed = JobHome(str(home)).standby_record()["rehearsal"]
        assert (rehearsed["verdict"], rehearsed["with_state"]) == ("compatible", True), rehearsed
        assert rehearsed["records"] > 0, "the rehearsal ran the job's last batch and newer records on its state"
        assert JobHome(str(home)).current_generation() == first["generation"], "the moves keep the checkpoint"

        # From the offsets alone, through the standby: the new generation's start is seeded in its checkpoint.
        code, out, err = run("upgrade", *job, "--app-version", "4", "--drop-state", "--json", *FAST_UPGRADE)
        assert code == 0, out + err
        dropped = json.loads(out)
        assert (dropped["rehearsal"]["verdict"], dropped["rehearsal"]["with_state"]) == ("compatible", False), dropped
        operations = [r["operation"] for r in JobHome(str(home)).history()]
        assert operations.count("standby-go") == 2, "both upgrades to the connector were taken by their standbys"
        fourth = wait_running(home, "4")
        assert fourth["generation"] == first["generation"] + 1
        start = JobHome(str(home)).generation_info(fourth["generation"])["start_offsets"][topic]
        assert sum(start.values()) > 0, "the new generation starts where the old one stopped, not at the beginning"

        code, out, err = run("stop", "--job-home", str(home), "--savepoint", "--json")
        assert code == 0, out + err
        stopped = json.loads(out)
        assert stopped["state"] == "STOPPED" and stopped["savepoint"]["id"], stopped
    finally:
        feeder.stop()
        kill_drivers(home)  # after a failure: no driver left writing into the next run's home

    ends = committed(kafka_bootstrap, group, topic, PARTITIONS)
    assert {str(p): o for p, o in ends.items()} == JobHome(str(home)).status()["last_offsets"][topic], (
        "the group holds the last batch's offsets")
    dropped_at = {int(p): o for p, o in start.items()}
    assert newest_totals(output, first["generation"]) == totals_of(events_between(kafka_bootstrap, topic, {},
                                                                                  dropped_at)), "generation 1"
    assert newest_totals(output, fourth["generation"]) == totals_of(
        events_between(kafka_bootstrap, topic, dropped_at, ends)), "the drop-state generation, from its seeded start"
    assert SECRET.encode() not in all_process_arguments()
    for path in (*home.rglob("*"), *output.rglob("*")):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), f"the secret is in {path}"


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
