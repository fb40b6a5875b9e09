"""The runtime starts where the job home's current generation says, in-process on the shared Spark session."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import read_status
from tests.kafka_utils import committed, create_topic, produce, unique

pytestmark = pytest.mark.integration


def run_available_now(spark, home: str, config: StreamConfig, seen: list):
    runtime = StreamRuntime(spark, home, config)

    def collect(batch_df, batch_id):
        seen.extend(row.offset for row in batch_df.select("offset").collect())

    writer = runtime.read_stream().writeStream.foreachBatch(collect).trigger(availableNow=True)
    return runtime, runtime.run(writer)


def test_first_start_records_generation_then_control_plane_generation_wins(spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("gen"), 1)
    produce(kafka_bootstrap, topic, [(None, f"v{i}") for i in range(6)], partition=0)
    group = unique("gen-group")
    home = str(tmp_path / "home")
    config = StreamConfig(job_name="gen", bootstrap_servers=kafka_bootstrap, group_id=group, topics=[topic],
                          starting_offsets="earliest", heartbeat_seconds=0.5)

    # A stop request left by a dead earlier run must not stop this one.
    (tmp_path / "home" / "control").mkdir(parents=True)
    (tmp_path / "home" / "control" / "stop").write_text(json.dumps({"requested_at": "old", "by": "old"}))

    seen: list[int] = []
    runtime, result = run_available_now(spark, home, config, seen)
    assert result.exit_code == 0 and result.state == "STOPPED", result.summary()
    assert sorted(seen) == list(range(6))
    # The run ends as soon as the query does; its summary still counts the last batch's records,
    # whose progress event arrives a moment after the query has ended.
    assert (result.batches, result.records) == (1, 6), result.summary()
    job = JobHome(home)
    assert job.generations() == [1]
    assert job.generation_info(1)["reason"] == "submit"
    assert job.generation_info(1)["start_offsets"] == "earliest"
    resolved = json.loads((tmp_path / "home" / "generations" / "0001.start.json").read_text())
    assert resolved["offsets"] == {topic: {"0": 0}}, "the source records where 'earliest' resolved to"
    status = read_status(home)
    assert status["state"] == "STOPPED" and status["last_offsets"] == {topic: {"0": 6}}
    assert status["group_commits"]["failures"] == 0
    assert committed(kafka_bootstrap, group, topic, 1) == {0: 6}

    # The control plane starts generation 2 at offset 2 (e.g. a reset that dropped state).
    job.new_generation("reset", start_offsets={topic: {"0": 2}})
    seen.clear()
    runtime, result = run_available_now(spark, home, config, seen)
    assert result.exit_code == 0, result.summary()
    assert runtime.generation == 2 and runtime.checkpoint_location.endswith("checkpoints/0002")
    assert sorted(seen) == list(range(2, 6))
    assert result.records == 4, result.summary()
    assert committed(kafka_bootstrap, group, topic, 1) == {0: 6}


def test_a_driver_does_not_start_while_a_control_operation_holds_the_job(spark, kafka_bootstrap, tmp_path,
                                                                         monkeypatch):
    """A reset or restore in progress owns the checkpoint: the driver refuses instead of racing it (after
    waiting out START_LOCK_WAIT_SECONDS, here shortened)."""
    from airflow_kafka_stream.errors import JobStateError
    from airflow_kafka_stream.runtime import takeover

    monkeypatch.setattr(takeover, "START_LOCK_WAIT_SECONDS", 0.5)

    topic = create_topic(kafka_bootstrap, unique("locked"), 1)
    home = str(tmp_path / "home")
    config = StreamConfig(job_name="locked", bootstrap_servers=kafka_bootstrap, group_id=unique("g"),
                          topics=[topic], heartbeat_seconds=0.5)
    job = JobHome(home)
    with job.lock("reset", holder="operator@console"):
        runtime = StreamRuntime(spark, home, config)
        with pytest.raises(JobStateError, match="operator@console"):
            runtime.prepare()
    assert read_status(home) is None, "a refused start writes no status"
    assert job.generations() == [], "and creates no checkpoint generation"


def test_a_failed_run_reports_its_error_without_secrets(spark, kafka_bootstrap, tmp_path):
    """The error text goes to status.json, the history and Airflow's UI: secret values are masked there."""
    topic = create_topic(kafka_bootstrap, unique("secret"), 1)
    produce(kafka_bootstrap, topic, [(None, "v")], partition=0)
    home = str(tmp_path / "home")
    password = "hunter2-not-for-logs"
    config = StreamConfig(job_name="secret", bootstrap_servers=kafka_bootstrap, group_id=unique("secret-group"),
                          topics=[topic], starting_offsets="earliest",
                          source_options={"kafka.sasl.password": password})

    def leaky(batch_df, batch_id):
        raise RuntimeError(f"cannot log in with password {password}")

    runtime = StreamRuntime(spark, home, config)
    result = runtime.run(runtime.read_stream().writeStream.foreachBatch(leaky).trigger(availableNow=True))
    assert result.exit_code != 0 and result.state == "FAILED", result.summary()
    status_text = json.dumps(read_status(home))
    assert "cannot log in with password ***" in status_text
    assert password not in status_text
    assert password not in (tmp_path / "home" / "history.jsonl").read_text()
