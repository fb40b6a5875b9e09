"""A generation that `restore --drop-state` seeded and no query has started on yet, and a generation directory
without its record.

A seeded generation is an empty checkpoint directory plus ``generations/NNNN.json``
holding the offsets the job will start at. It is fit to start from: fsck says so
and names those offsets, `checkpoint` shows them, verify compares the group with
them, and operations that need a committed batch (savepoint create, reset) refuse
with the reason and change nothing. Real Spark then starts on it at exactly those
offsets, and fsck checks it as any other checkpoint.
"""

from __future__ import annotations

import json

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.ops import savepoints
from tests.integration.cli_helpers import (
    Job,
    assert_unchanged,
    cli,
    commit_group,
    consume,
    make_job,
    reads_from,
    snapshot,
    write_job_json,
)
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def original(spark, kafka_bootstrap, tmp_path_factory) -> Job:
    """A stateless job that read 6 records per partition, saved, then 4 more records per partition produced."""
    topic = create_topic(kafka_bootstrap, unique("seeded"), partitions=2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"v-{p}-{i}") for i in range(6)], partition=p)
    job = make_job(spark, kafka_bootstrap, tmp_path_factory.mktemp("seeded") / "home", {topic: 2})
    job.extra["savepoint"] = savepoints.create(job.jobhome).id
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"w-{p}-{i}") for i in range(4)], partition=p)
    return job


@pytest.fixture
def seeded(original, tmp_path) -> Job:
    """A copy of the job home restored with --drop-state: generation 0002, seeded, not started."""
    job = original.copy(tmp_path / "home")
    restored = savepoints.restore(job.jobhome, job.extra["savepoint"], drop_state=True)
    assert restored.generation == 2
    return job


def home(job: Job) -> list[str]:
    return ["--job-home", str(job.home)]


def start_offsets(job: Job) -> dict[str, dict[str, int]]:
    return {topic: {str(p): 6 for p in range(n)} for topic, n in job.topics.items()}


def test_fsck_says_a_seeded_generation_is_fit_and_where_it_starts(capsys, seeded):
    result = cli(capsys, "checkpoint", "fsck", *home(seeded))
    assert result.code == 0, result.out + result.err
    assert "OK" in result.out.splitlines()[0]
    assert "generation 2 (restore-drop-state from savepoint" in result.out
    assert "has not started yet" in result.out
    assert json.dumps(start_offsets(seeded), separators=(",", ":"), sort_keys=True) in result.out
    assert "fit to start from" in result.out


def test_position_says_not_started_and_shows_the_start_offsets(capsys, seeded):
    result = cli(capsys, "checkpoint", *home(seeded), "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert (data["generation"], data["started"], data["batch_id"]) == (2, False, None)
    assert data["start_offsets"] == start_offsets(seeded)
    text = cli(capsys, "checkpoint", *home(seeded))
    assert text.code == 0 and "has not started yet" in text.out


def test_verify_compares_the_group_with_the_start_offsets(capsys, seeded):
    result = cli(capsys, "verify", *home(seeded), "--json")
    assert result.code == 0, result.out + result.err  # the group sits where the job will resume
    data = result.json()
    assert "has not started yet" in data["note"]
    assert {(r["partition"], r["checkpoint_offset"], r["group_offset"]) for r in data["partitions"]} == {
        (0, 6, 6), (1, 6, 6)}
    commit_group(seeded.bootstrap, seeded.group, {tp: 2 for tp in seeded.partitions()})
    try:
        behind = cli(capsys, "verify", *home(seeded))
    finally:  # the group is shared with the other tests' copies of the job
        commit_group(seeded.bootstrap, seeded.group, {tp: 6 for tp in seeded.partitions()})
    assert behind.code == 1, behind.out
    assert "has not started yet" in behind.out


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        pytest.param(["savepoint", "create"], "nothing to save yet", id="savepoint-create"),
        pytest.param(["reset", "--to-earliest", "--execute"], "an offset reset needs a committed batch",
                     id="reset"),
        pytest.param(["reset", "--to-earliest", "--execute", "--drop-state"], "an offset reset needs a committed",
                     id="reset-drop-state"),
    ],
)
def test_operations_that_need_a_committed_batch_refuse_and_change_nothing(capsys, seeded, argv, reason):
    before = snapshot(seeded)
    result = cli(capsys, *argv, *home(seeded))
    assert result.code == 2, result.out + result.err
    assert "has not started yet" in result.err and reason in result.err
    assert_unchanged(seeded, before)


def test_spark_starts_the_seeded_generation_at_its_offsets(capsys, spark, seeded):
    rows = consume(spark, seeded)
    topic = next(iter(seeded.topics))
    assert reads_from(rows) == {TopicPartition(topic, 0): (6, 4), TopicPartition(topic, 1): (6, 4)}
    result = cli(capsys, "checkpoint", "fsck", *home(seeded))
    assert result.code == 0 and "committed batch 0" in result.out, result.out


def test_a_generation_directory_without_its_record_names_the_missing_record(capsys, kafka_bootstrap, tmp_path):
    job_home = tmp_path / "home"
    write_job_json(job_home, kafka_bootstrap, unique("g"), ["t"])
    (job_home / "checkpoints" / "0001").mkdir(parents=True)
    for argv in (["checkpoint"], ["checkpoint", "fsck"]):
        result = cli(capsys, *argv, "--job-home", str(job_home))
        assert result.code == 2, result.out
        assert "checkpoints/0001 exist(s) but generations/0001.json" in result.err
        assert "checkpoints/ is empty" not in result.err
        assert "checkpoint fsck of" in result.err and "[checkpoint: --checkpoint]" in result.err
    (job_home / "checkpoints" / "0001").rmdir()
    empty = cli(capsys, "checkpoint", "--job-home", str(job_home))
    assert empty.code == 2 and "no checkpoint generation yet" in empty.err
