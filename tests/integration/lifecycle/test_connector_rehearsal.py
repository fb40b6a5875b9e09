"""An upgrade's rehearsal of a query on Spark's own connector, in this process: bounded through its checkpoints.

The connector keeps the options its DataFrame was defined with, so the rehearsal stretches the copy's re-run
batch over the newer records and seeds a checkpoint for each stateless run (``runtime/rehearsal.py``). A version
that raises on one record is refused naming that record, found by stateless runs over parts of the stretch; a
version that does not is compatible after reading the job's last batch and every newer record. Neither changes
the job's checkpoint.
"""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.rehearsal import Verdict
from airflow_kafka_stream.runtime import rehearsal
from tests.integration.cli_helpers import consume, make_job, source_frame
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def test_a_connector_rehearsal_runs_the_newer_records_and_locates_the_one_a_version_fails_on(spark, kafka_bootstrap,
                                                                                            tmp_path):
    from pyspark.sql import functions as F

    topic = create_topic(kafka_bootstrap, unique("conn-rehearsal"), 2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"a-{p}-{i}") for i in range(10)], partition=p)
    job = make_job(spark, kafka_bootstrap, tmp_path / "home", {topic: 2}, source="kafka")
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"b-{p}-{i}") for i in range(5)], partition=p)
    consume(spark, job)  # the job's last batch: offsets 10-14 of each partition, re-run by the rehearsal
    produce(kafka_bootstrap, topic, [(None, "c-1-15"), (None, "c-1-16"), (None, "c-1-17"), (None, "poison")],
            partition=1)  # newer records; the poison one at offset 18 of partition 1
    before = job.position()

    def version(fails_on_poison: bool):
        def checked(value: str) -> str:
            if fails_on_poison and value == "poison":
                raise ValueError(f"cannot parse {value!r}")
            return value

        frame = source_frame(spark, job, "earliest")
        return frame.select(F.udf(checked, "string")(F.col("value").cast("string")).alias("v")).writeStream

    def rehearse(writer, token: str):
        return rehearsal.rehearse(spark, writer.format("noop"), rehearsal.RehearsalSetup(
            home=job.jobhome, token=token, checkpoint_url=job.checkpoint, binding_file=None,
            options={"kafka.bootstrap.servers": kafka_bootstrap}, timeout_seconds=240))

    good = rehearse(version(fails_on_poison=False), "good")
    assert (good.verdict, good.batches, good.with_state) == (Verdict.COMPATIBLE, 1, True), good
    assert good.records == 5 + 5 + 4, "the job's last batch and every newer record, in one bounded batch"

    bad = rehearse(version(fails_on_poison=True), "bad")
    assert bad.verdict == Verdict.FAILS, bad
    assert bad.reason.endswith(f"on {topic} partition 1 offset 18"), bad.reason
    assert "ValueError" in bad.reason, bad.reason

    assert job.position() == before, "the job's checkpoint is only read"
    assert not (tmp_path / "home" / "rehearsals").exists() or not any((tmp_path / "home" / "rehearsals").iterdir())
