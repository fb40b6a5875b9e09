"""The control plane on a job home in S3 (a real local S3 server): every operation, then Spark resumes.

Spark itself cannot write to this S3 server (no hadoop-aws here), so the job is
run locally, its home is uploaded, operated on in S3 through the CLI, and the
resulting checkpoint generation is downloaded for Spark to resume from.
"""

from __future__ import annotations

import json
import uuid

import pytest
import s3fs

from airflow_kafka_stream.checkpoint.reader import read_position
from tests.integration.cli_helpers import Job, cli, consume, make_job, reads_from
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def local_job(spark, kafka_bootstrap, tmp_path_factory) -> Job:
    topic = create_topic(kafka_bootstrap, unique("s3job"), 2)
    for partition in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(10)], partition=partition)
    return make_job(spark, kafka_bootstrap, tmp_path_factory.mktemp("s3job") / "home", {topic: 2})


def test_every_operation_on_an_s3_job_home(capsys, spark, s3_server, local_job, tmp_path):
    fs = s3fs.S3FileSystem(**s3_server["storage_options"])
    url = f"s3://{s3_server['bucket']}/{uuid.uuid4().hex}/home"
    fs.put(str(local_job.home), url.removeprefix("s3://"), recursive=True)
    home = ["--job-home", url, "--storage-options", json.dumps(s3_server["storage_options"])]
    topic = next(iter(local_job.topics))

    position = cli(capsys, "checkpoint", *home, "--json")
    assert position.code == 0, position.err
    assert position.json()["offsets"] == {topic: {"0": 10, "1": 10}}
    assert cli(capsys, "checkpoint", "fsck", *home).code == 0
    assert cli(capsys, "verify", *home).code == 0

    saved = cli(capsys, "savepoint", "create", *home, "--json")
    assert saved.code == 0, saved.err
    reset = cli(capsys, "reset", *home, "--to-offset", "4", "--execute", "--json")
    assert reset.code == 0, reset.err
    assert reset.json()["verified"], reset.json()["verification"]
    after = cli(capsys, "checkpoint", *home, "--json").json()
    assert after["offsets"] == {topic: {"0": 4, "1": 4}} and after["batch_id"] == position.json()["batch_id"] + 1

    # Roll back to the savepoint taken before the reset: a new generation, in S3.
    restored = cli(capsys, "restore", *home, "--savepoint", saved.json()["id"], "--json")
    assert restored.code == 0, restored.err
    assert restored.json()["generation"] == 2
    operations = [r["operation"] for r in cli(capsys, "history", *home, "--json").json()]
    assert operations == ["savepoint-create", "reset", "restore"]
    assert not fs.exists(f"{url.removeprefix('s3://')}/lock")

    # Spark resumes the restored generation exactly at the savepoint's offsets.
    local = tmp_path / "home"
    fs.get(url.removeprefix("s3://"), str(local), recursive=True)
    job = Job(local, local_job.bootstrap, local_job.group, dict(local_job.topics))
    assert read_position(job.checkpoint).source_offsets(0) == local_job.position()
    produce(local_job.bootstrap, topic, [(None, "late")], partition=0)
    assert reads_from(consume(spark, job)) == {(topic, 0): (10, 1)}
