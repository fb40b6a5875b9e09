"""Upgrades that cannot fail after the downtime starts: the standby rehearses the new version's whole query.

One stateful job (the example pipeline's ``--totals``: a running amount and count per key in the HDFS state
store) runs for the whole module on a continuous feed. Versions 2 that break it (a changed key type, an extra
stateful operator, a sink that is not installed, a function that raises on a record of the backlog) are
refused before the old version is asked to stop: it runs on untouched, with no stop request in its history.
``upgrade --check`` reports each verdict and changes nothing. The drop_state upgrade of the changed key, and a
compatible version, go through; the totals per key then equal the feed's, so nothing was lost or counted twice.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import replace
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Consumer, TopicPartition

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops.launcher import Submission
from airflow_kafka_stream.ops.standby import launch_standby, wait_ready
from airflow_kafka_stream.ops.stop import stop_job
from airflow_kafka_stream.ops.upgrade import UpgradeOptions, upgrade
from airflow_kafka_stream.ops.upgrade_check import check_upgrade
from airflow_kafka_stream.storage.jobhome import STANDBY_RECORD
from airflow_kafka_stream.storage.processes import driver_gone
from tests.integration.airflow.test_airflow_upgrade import APPS
from tests.integration.cli_helpers import cli_subprocess
from tests.integration.lifecycle.test_runtime_lifecycle import wait_for
from tests.integration.lifecycle.test_standby import PARTITIONS, RunningJob, fed_and_running
from tests.kafka_utils import produce, unique, watermarks

pytestmark = pytest.mark.integration

TOTALS = ["--totals", "--state-store", "hdfs", "--state-partitions", "2"]
#: Short gates: the module's upgrades need only show the order of events, not a long health window.
FAST = UpgradeOptions(health_batches=1, health_window_seconds=5, health_startup_seconds=240, stop_timeout_seconds=60,
                      start_timeout_seconds=240, standby_ready_timeout_seconds=300, rehearsal_timeout_seconds=180,
                      poll_seconds=0.5)


class TotalsJob(RunningJob):
    """The module's stateful job and what its tests read of Kafka."""

    def kafka_config(self) -> dict:
        return {"bootstrap.servers": self.bootstrap}

    def end_offsets(self) -> dict[int, int]:
        return {part: high for part, (_low, high) in watermarks(self.bootstrap, self.topic, PARTITIONS).items()}

    def committed_to(self, ends: dict[int, int]) -> bool:
        offsets = (self.status().get("last_offsets") or {}).get(self.topic) or {}
        return all(int(offsets.get(str(part), -1)) >= end for part, end in ends.items())

    def records(self, start: dict[int, int] | None = None) -> list[tuple[int, int, dict]]:
        """(partition, offset, value) of every record from ``start`` (default: the beginning) to the end."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": unique("reader"),
                             "enable.auto.commit": False})
        ends = self.end_offsets()
        consumer.assign([TopicPartition(self.topic, part, (start or {}).get(part, 0)) for part in ends])
        found, left = [], {part for part, end in ends.items() if end > (start or {}).get(part, 0)}
        while left:
            message = consumer.poll(10)
            assert message is not None and message.error() is None, message and message.error()
            found.append((message.partition(), message.offset(), json.loads(message.value())))
            if message.offset() + 1 >= ends[message.partition()]:
                left.discard(message.partition())
        consumer.close()
        return found


@pytest.fixture(scope="module")
def job(tmp_path_factory, kafka_bootstrap):
    with fed_and_running(TotalsJob(tmp_path_factory.mktemp("rehearsal"), kafka_bootstrap, extra=TOTALS)) as running:
        yield running


def still_runs_untouched(job: RunningJob, before: dict) -> None:
    """The old version runs as it did and was never asked to stop; no rehearsal left anything behind."""
    after = wait_for(lambda: (s := job.status()).get("last_batch_id", -1) > before["last_batch_id"] and s,
                     "the old version to commit another batch")
    assert (after["state"], after["pid"], after["generation"], after["query_id"]) == (
        "RUNNING", before["pid"], before["generation"], before["query_id"])
    operations = [r["operation"] for r in job.jobhome.history()]
    assert {"stop", "stop-request", "restore", "standby-go"} & set(operations) == set(), operations
    assert not (job.home / "rehearsals").exists() or not any((job.home / "rehearsals").iterdir())
    record = job.jobhome.read_control(STANDBY_RECORD)
    assert record["state"] in (rules.StandbyState.FAILED, rules.StandbyState.ENDED), record


def refused_before_the_stop(job: RunningJob, app: str, version: str, *expected: str,
                            before_untouched=lambda: None) -> str:
    before = job.status()
    with pytest.raises(JobStateError, match="failed before any downtime") as refused:
        upgrade(job.jobhome, Submission(version), job.launcher(APPS / app), job.kafka_config(), FAST)
    message = str(refused.value)
    for text in expected:
        assert text in message, message
    before_untouched()
    still_runs_untouched(job, before)
    return message


def test_a_changed_key_an_extra_operator_and_a_missing_sink_are_refused_before_the_stop(job):
    refused_before_the_stop(job, "totals_key_long.py", "2", "needs drop_state",
                            "expects key schema (_groupingexpression bigint, the query's key) but the state holds "
                            "(_groupingexpression string, the query's key)",
                            "upgrade with drop_state")
    refused_before_the_stop(job, "totals_extra_operator.py", "3",
                            "the new version has 2 stateful operators", "the checkpoint 1")
    refused_before_the_stop(job, "totals_bad_sink.py", "4", "sink (format 'nosuchformat') cannot be opened",
                            "DATA_SOURCE_NOT_FOUND")


def test_a_record_the_new_code_cannot_handle_is_named_before_the_stop(job):
    job.feeder.paused.set()
    try:
        produce(job.bootstrap, job.topic, [("k1", json.dumps({"id": "poison", "key": "k1", "amount": -1}))])
        ends = job.end_offsets()
        wait_for(lambda: job.committed_to(ends), "the old version to commit the poison record")
        # The feed stays paused until the standby rehearsed: the poison record is in the job's newest batch.
        message = refused_before_the_stop(job, "totals_poison.py", "5", "ValueError: amount -1.0 is not a valid amount",
                                          before_untouched=job.feeder.paused.clear)
    finally:
        job.feeder.paused.clear()
    partition, offset = next((p, o) for p, o, value in job.records() if value["id"] == "poison")
    assert f"{job.topic} partition {partition} offset {offset}" in message, message


def test_a_rehearsal_past_its_limit_or_a_standby_killed_in_it_ends_the_upgrade_before_the_stop(job):
    before = job.status()
    with pytest.raises(JobStateError, match="failed before any downtime") as refused:
        upgrade(job.jobhome, Submission("11"), job.launcher(), job.kafka_config(),
                replace(FAST, rehearsal_timeout_seconds=0.01))
    assert "timed out: the rehearsal outlived its time limit" in str(refused.value), refused.value
    still_runs_untouched(job, before)
    # A standby killed while it rehearses: the upgrade sees its process gone and stops nothing.
    failure: list[BaseException] = []

    def upgrading() -> None:
        try:
            upgrade(job.jobhome, Submission("12"), job.launcher(), job.kafka_config(), FAST)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            failure.append(exc)

    thread = threading.Thread(target=upgrading)
    thread.start()
    record = wait_for(lambda: (r := job.jobhome.read_control(STANDBY_RECORD) or {}).get("version") == "12"
                      and r.get("state") == rules.StandbyState.STARTING and (job.home / "rehearsals" / r["token"]).exists() and r,
                      "the standby to start its rehearsal", 240)
    job.kill(record["pid"])
    thread.join(300)
    assert failure and "failed before any downtime" in str(failure[0]), failure
    still_runs_untouched(job, before)


def files_of(home: Path) -> set[str]:
    """The job home's files but the running job's own (its checkpoint and status, which change as it runs)."""
    return {str(path.relative_to(home)) for path in home.rglob("*") if path.is_file()
            and not str(path.relative_to(home)).startswith(("checkpoints/", "status.json"))}


def test_upgrade_check_reports_each_verdict(job):
    before = files_of(job.home)
    found = check_upgrade(job.jobhome, Submission("6"), job.launcher(APPS / "totals_key_long.py"), FAST)
    left = {name for name in files_of(job.home) - before if not name.startswith("logs/standby-driver-")}
    assert left <= {"history.jsonl", "control/standby.json"}, f"docs/upgrade-check.md does not list {left}"
    assert not (job.home / "control" / "standby-go.json").exists(), "the check's cancel is left behind"
    assert (found.verdict, found.would_upgrade) == ("needs drop_state", False), found
    assert "expects key schema (_groupingexpression bigint, the query's key) but the state holds " \
        "(_groupingexpression string, the query's key)" in found.reason, "Spark's made-up name, and the query's"
    application = ["--home", job.home, "--bootstrap", job.bootstrap, "--topic", job.topic, "--group", job.group,
                   "--output", job.output, "--heartbeat-seconds", "3", "--app-version", "7", *TOTALS]
    shown = cli_subprocess("upgrade", "--check", "--job-home", job.home, "--app-version", "7", "--bootstrap-server",
                           job.bootstrap, "--application", APPS / "totals_extra_operator.py", "--master", "local[2]",
                           "--json", "--standby-timeout", "300", "--", *application)
    assert shown.returncode == 2, shown.stdout + shown.stderr
    checked = json.loads(shown.stdout)
    assert (checked["verdict"], checked["would_upgrade"]) == ("needs drop_state", False), checked
    assert "stateful operators" in checked["reason"], checked


def test_drop_state_and_compatible_upgrades_go_through_exactly_once(job):
    # A standby launched ahead to drop the state rehearsed without it: an upgrade keeping the state refuses it.
    ahead = launch_standby(job.jobhome, Submission("8"), job.launcher(APPS / "totals_key_long.py"),
                           rehearse={"drop_state": True, "timeout_seconds": 180})
    wait_ready(job.jobhome, ahead, timeout=300, poll=0.5)
    with pytest.raises(JobStateError, match="rehearsed without the job's state"):
        upgrade(job.jobhome, Submission("8"), job.launcher(APPS / "totals_key_long.py"), job.kafka_config(), FAST)
    dropped = upgrade(job.jobhome, Submission("8"), job.launcher(APPS / "totals_key_long.py"), job.kafka_config(),
                      replace(FAST, drop_state=True))
    assert dropped.version == "8"
    assert not job.jobhome.standby_record().get("started_ahead"), "its query, started ahead on the old generation"
    launches = [r for r in job.jobhome.history() if r["operation"] == "standby-launch"
                and r["args"]["app_version"] == "8"]
    assert len(launches) == 1, "the upgrade with drop_state took over the standby launched ahead"
    generation = job.status()["generation"]
    seeded = job.jobhome.generation_info(generation)["start_offsets"][job.topic]
    compatible = upgrade(job.jobhome, Submission("9"), job.launcher(APPS / "totals_key_long.py"), job.kafka_config(),
                         FAST)
    assert compatible.version == "9" and job.status()["generation"] == generation, "state kept across the second"
    assert job.jobhome.standby_record().get("started_ahead") is True, "the same generation: the query started ahead"
    assert (dropped.rehearsal["verdict"], dropped.rehearsal["with_state"]) == ("compatible", False), dropped
    assert (compatible.rehearsal["verdict"], compatible.rehearsal["with_state"]) == ("compatible", True), compatible
    assert compatible.rehearsal["batches"] >= 1 and compatible.rehearsal["records"] > 0, compatible
    operations = [r["operation"] for r in job.jobhome.history()]
    assert operations.count("standby-go") == 2, operations
    job.feeder.stop()
    ends = job.end_offsets()
    wait_for(lambda: job.committed_to(ends), "the job to read the whole feed", 240)
    stop_job(job.jobhome, 120)
    # Both versions count by the key's length, from the drop_state generation's offsets on: every record once.
    expected = [value for _p, _o, value in job.records({int(p): int(o) for p, o in seeded.items()})]
    totals = newest_totals(job.output, generation)
    assert totals == {2: (float(sum(v["amount"] for v in expected)), len(expected))}, totals
    assert not (job.home / "rehearsals").exists() or not any((job.home / "rehearsals").iterdir())
    assert sorted(p.name for p in (job.output / "totals").iterdir()) == [
        f"generation={g:04d}" for g in range(1, generation + 1)], "no rehearsal wrote to the job's output"
    # A check changes nothing of a (stopped) job: same checkpoint, job.json, savepoints, output. "Stopped" is the
    # final status; the driver clears its stop request just after, so the digest waits for its process to end.
    wait_for(lambda: driver_gone(job.status()), "the stopped driver's process to end", 60)
    before, output = home_digest(job.home), home_digest(job.output)
    found = check_upgrade(job.jobhome, Submission("10"), job.launcher(APPS / "totals_key_long.py"), FAST)
    assert found.verdict == "compatible", found
    assert changed_files(before, home_digest(job.home)) == [], "a check changes nothing of the job home"
    assert changed_files(output, home_digest(job.output)) == [], "a check changes nothing of the output"


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The files added, removed or rewritten between two digests, each named with what happened to it."""
    return sorted([f"added {name}" for name in after.keys() - before.keys()]
                  + [f"removed {name}" for name in before.keys() - after.keys()]
                  + [f"changed {name}" for name in before.keys() & after.keys() if before[name] != after[name]])


def newest_totals(output: Path, generation: int) -> dict:
    rows = ds.dataset(str(output / "totals" / f"generation={generation:04d}"), format="parquet",
                      partitioning="hive").to_table().to_pylist()
    newest: dict = {}
    for row in sorted(rows, key=lambda row: row["batch"]):
        newest[row["key"]] = (row["amount"], row["events"])
    return newest


def home_digest(home: Path) -> dict[str, str]:
    """Every file a check must not change: all but the history, the standby's record and the drivers' logs."""
    skipped = ("history.jsonl", "control/standby.json", "logs/", "lock", "status.json")
    return {str(path.relative_to(home)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(home.rglob("*")) if path.is_file()
            and not str(path.relative_to(home)).startswith(skipped)}
