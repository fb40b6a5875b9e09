"""A job home on S3 through Spark itself: the example pipeline's checkpoint, status and stop request all in
a real local S3 server, the control plane on the same URL, then Spark resumes from the S3 checkpoint.

The job home is named for fsspec (``s3://bucket/...``) and given the fsspec storage options; the runtime
turns both into Spark's (``s3a://``, ``fs.s3a.*``). Spark's S3 connector comes from scripts/setup-s3a-jars:
hadoop-aws 3.3.1, built for Hadoop 3.3, where Spark 4.2 ships Hadoop 3.5. The settings the two disagree on
(3.5's defaults name durations as ``60s`` and an SDK v2 credentials class) are set here, for the test's
connector only; none of them is the job home's naming or credentials, which the runtime sets.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.storage.files import STORAGE_OPTIONS_ENV
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import read_status
from tests.conftest import ROOT
from tests.integration.cli_helpers import cli
from tests.integration.lifecycle.test_exactly_once import (
    Pipeline,
    assert_exactly_once,
    end_offsets,
    events,
    group_offsets,
    sink_rows,
)
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

JARS = ROOT / ".venv" / "s3a-jars"

#: Hadoop 3.3's connector against Hadoop 3.5's defaults (see the module's docstring).
CONNECTOR_SETTINGS = {
    "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    "fs.s3a.connection.establish.timeout": "30000",
    "fs.s3a.connection.timeout": "200000",
    "fs.s3a.connection.ttl": "300000",
    "fs.s3a.threads.keepalivetime": "60",
    "fs.s3a.multipart.purge.age": "86400",
    "fs.s3a.assumed.role.session.duration": "1800",
}


def connector_submit_args() -> str:
    jars = sorted(JARS.glob("*.jar"))
    if len(jars) != 2:
        pytest.fail(f"Spark's S3 connector is missing from {JARS}: run scripts/setup-s3a-jars")
    conf = " ".join(f"--conf spark.hadoop.{key}={value}" for key, value in CONNECTOR_SETTINGS.items())
    return f"--jars {','.join(map(str, jars))} {conf} pyspark-shell"


class S3Pipeline(Pipeline):
    """The example pipeline as its own driver process, its job home in S3 (status and stop request there too)."""

    def __init__(self, tmp: Path, url: str, storage_options: dict, bootstrap: str, topic: str, group: str):
        self.url, self.storage_options = url, storage_options
        env = {**os.environ, "PYSPARK_SUBMIT_ARGS": connector_submit_args(),
               STORAGE_OPTIONS_ENV: json.dumps(storage_options)}
        super().__init__(tmp, bootstrap, topic, group, "--heartbeat-seconds", "2", "--max-offsets-per-trigger", "15",
                         home_url=url, env=env)

    def status(self) -> dict:
        return read_status(self.url, self.storage_options) or {}

    def request_stop(self) -> None:
        JobHome(self.url, self.storage_options).request_stop(by="test")


def test_a_job_home_on_s3_through_spark_then_the_control_plane_then_a_resume(
    capsys, s3_server, kafka_bootstrap, tmp_path
):
    topic = create_topic(kafka_bootstrap, unique("s3spark"), 2)
    group = unique("s3spark-group")
    options = s3_server["storage_options"]
    url = f"s3://{s3_server['bucket']}/{uuid.uuid4().hex}/home"
    produce(kafka_bootstrap, topic, events(0, 40))

    def ends() -> dict:
        return {topic: {str(p): high for p, high in end_offsets(kafka_bootstrap, topic).items()}}

    def run_to_the_end() -> S3Pipeline:
        """A driver on the S3 home, until it has read everything, then stopped gracefully."""
        pipeline = S3Pipeline(tmp_path, url, options, kafka_bootstrap, topic, group)
        try:
            pipeline.wait_for_offsets(topic, end_offsets(kafka_bootstrap, topic), timeout=180)
            pipeline.request_stop()
            assert pipeline.wait_exit() == 0, pipeline.log_tail()
        finally:
            pipeline.kill()
        return pipeline

    status = run_to_the_end().status()
    assert status["checkpoint"].startswith(url), status["checkpoint"]  # the fsspec name, as the control plane has it
    position = read_position(status["checkpoint"], options)  # what Spark wrote, read from S3
    batch, offsets, in_flight = position.batch_id, position.committed_kafka_offsets(), (
        position.in_flight_batch_id is not None)
    assert {tp.topic: {} for tp in offsets} == {topic: {}} and not in_flight
    assert {topic: {str(tp.partition): o for tp, o in offsets.items()}} == ends() == group_offsets(
        kafka_bootstrap, group, topic)

    home = ["--job-home", url, "--storage-options", json.dumps(options)]
    verified = cli(capsys, "verify", *home, "--json")
    assert verified.code == 0, verified.err

    produce(kafka_bootstrap, topic, events(40, 20))
    run_to_the_end()
    assert_exactly_once(sink_rows(tmp_path / "out"), {f"e{i}" for i in range(60)})
    resumed = read_position(status["checkpoint"], options).batch_id
    assert resumed > batch  # the same S3 checkpoint went on: no new generation, no replay from the start
