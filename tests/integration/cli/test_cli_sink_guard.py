"""Rolling back to a savepoint must not let a file sink silently skip batches it logged after the savepoint."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from tests.integration.cli_helpers import assert_unchanged, cli, consume, make_job, reads_from, snapshot
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def saved(spark, kafka_bootstrap, tmp_path_factory):
    topic = create_topic(kafka_bootstrap, unique("sinkguard"), 1)
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(5)], partition=0)
    return make_job(spark, kafka_bootstrap, tmp_path_factory.mktemp("sinkguard") / "home", {topic: 1})


def sink_log(path, batches: int):
    log = path / "_spark_metadata"
    log.mkdir(parents=True)
    for batch in range(batches):
        (log / str(batch)).write_text("v1\n")
    return path


@pytest.mark.parametrize(
    ("logged_after", "allow", "code"),
    [
        pytest.param(3, False, 2, id="1-sink-ran-ahead-of-the-savepoint-refused"),
        pytest.param(3, True, 0, id="2-the-user-may-accept-it"),
        pytest.param(0, False, 0, id="3-sink-not-ahead-restores"),
    ],
)
def test_restore_with_state_checks_the_sink_log(capsys, saved, tmp_path, logged_after, allow, code):
    job = saved.copy(tmp_path / "home")
    created = cli(capsys, "savepoint", "create", "--job-home", str(job.home), "--json")
    assert created.code == 0, created.err
    batch = created.json()["batch_id"]
    sink = sink_log(tmp_path / "sink", batch + 1 + logged_after)
    generation = job.jobhome.current_generation()
    args = ["restore", "--job-home", str(job.home), "--savepoint", created.json()["id"], "--sink-path", str(sink)]
    result = cli(capsys, *args, *(["--allow-sink-batch-log"] if allow else []))
    assert result.code == code, result.err
    if code == 2:
        assert "silently skip batches" in result.err and f"up to {batch + logged_after}" in result.err
        assert job.jobhome.current_generation() == generation, "a refused restore starts no generation"
    else:
        assert job.jobhome.current_generation() == generation + 1


def test_reset_of_a_foreach_batch_job_follows_its_sink_kind(capsys, spark, saved, tmp_path):
    """A home whose job.json names a foreachBatch output as its sink path (as the example pipeline's did).

    Read as a file sink (what a bare sink_path meant) the reset is refused with the fix named; an empty
    --sink-path does not fall back to it; --sink-kind idempotent resets, and real Spark resumes at the target.
    """
    job = saved.copy(tmp_path / "home")
    output = tmp_path / "out" / "events"
    output.mkdir(parents=True)  # foreachBatch output: no _spark_metadata
    spec = json.loads((job.home / "job.json").read_text())
    (job.home / "job.json").write_text(json.dumps({**spec, "sink_path": str(output.parent)}))
    reset = ["reset", "--job-home", str(job.home), "--to-offset", "2", "--execute"]
    before = snapshot(job)

    as_file = cli(capsys, *reset)
    assert as_file.code == 2 and "no _spark_metadata" in as_file.err
    assert "set sink_kind to idempotent" in as_file.err and "--sink-kind" in as_file.err
    empty = cli(capsys, *reset, "--sink-path", "")
    assert empty.code == 2 and "sink_path is empty" in empty.err and "--sink-path" in empty.err
    assert_unchanged(job, before)

    done = cli(capsys, *reset, "--sink-kind", "idempotent", "--json")
    assert done.code == 0, done.err
    assert done.json()["verified"] and "idempotent sink" in done.json()["sink"]
    assert not (output.parent / "_spark_metadata").exists()
    assert job.history()[-1]["args"]["sink"] == {"kind": "idempotent", "path": str(output.parent)}
    assert reads_from(consume(spark, job)) == {job.partitions()[0]: (2, 3)}


def test_a_file_sink_recorded_with_its_kind_gets_its_batch_log_entry(capsys, spark, saved, tmp_path):
    """job.json's new shape, {"sink": {"kind": "file", ...}}: a reset appends the sink's log entry."""
    job = saved.copy(tmp_path / "home")
    sink = sink_log(tmp_path / "sink", read_position(job.checkpoint).batch_id + 1)  # the sink logged every batch
    spec = json.loads((job.home / "job.json").read_text())
    spec.pop("sink_path", None)
    (job.home / "job.json").write_text(json.dumps({**spec, "sink": {"kind": "file", "path": str(sink)}}))
    done = cli(capsys, "reset", "--job-home", str(job.home), "--to-current", "--execute", "--json")
    assert done.code == 0, done.err
    assert "file sink" in done.json()["sink"]
    assert (sink / "_spark_metadata" / str(done.json()["batch_id"])).read_text() == "v1"
