"""Records deleted under a job (retention, DeleteRecords), on the real broker.

A job's checkpoint holds the next offset to read. When Kafka deletes records the job has not read yet (the
retention of a slow job's topic, or an operator's ``kafka-delete-records``), the partition's low watermark moves
past that offset: those records are gone. With ``failOnDataLoss=true`` (the default) the query fails with a
message naming the partition, the lost range and the way out; with ``false`` it reads on from the earliest offset
Kafka still has. ``verify`` calls the partition OUT_OF_RANGE before the job is started again, and
``reset --to-earliest`` moves checkpoint and group to where Kafka's records begin, after which the job runs.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from airflow_kafka_stream.core.offsets import TopicPartition
from tests.integration.cli_helpers import cli, consume, make_job
from tests.integration.source.test_source_reading import stream
from tests.kafka_utils import create_topic, produce, unique, watermarks

pytestmark = pytest.mark.integration


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Kafka's DeleteRecords: the partition's low watermark becomes ``offset``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for future in admin.delete_records([KafkaTopicPartition(topic, partition, offset)]).values():
        future.result(30)
    assert watermarks(bootstrap, topic, partition + 1)[partition][0] == offset


def run_available(spark, bootstrap: str, topic: str, checkpoint: str, **options: str) -> list[int]:
    """One availableNow run (from earliest, or the checkpoint): the offsets read. Raises the query's error."""
    offsets: list[int] = []
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", **options)
    query = (df.writeStream.foreachBatch(lambda batch, _id: offsets.extend(r.offset for r in batch.collect()))
             .trigger(availableNow=True).option("checkpointLocation", checkpoint).start())
    try:
        query.awaitTermination(120)
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise query.exception()
    return sorted(offsets)


@pytest.fixture
def deleted_under_a_stopped_query(spark, kafka_bootstrap, tmp_path):
    """A query that read offsets 0-9 and stopped; then 10 more records arrived and 10-14 were deleted."""
    topic = create_topic(kafka_bootstrap, unique("data-loss"), 1)
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(10)], partition=0)
    checkpoint = str(tmp_path / "ckpt")
    assert run_available(spark, kafka_bootstrap, topic, checkpoint) == list(range(10))
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(10, 20)], partition=0)
    delete_records_before(kafka_bootstrap, topic, 0, 15)
    return topic, checkpoint


@pytest.mark.parametrize("read_mode", ["auto", "executors"])
def test_a_query_fails_naming_the_partition_the_lost_range_and_the_way_out(spark, kafka_bootstrap,
                                                                           deleted_under_a_stopped_query, read_mode):
    topic, checkpoint = deleted_under_a_stopped_query
    with pytest.raises(Exception) as failure:
        run_available(spark, kafka_bootstrap, topic, checkpoint, readMode=read_mode)
    message = str(failure.value)
    assert f"data loss on {topic}:0" in message
    assert "offsets 10..14 were deleted" in message and "Kafka holds [15, 20)" in message
    assert "reset the query's offsets" in message and "failOnDataLoss=false" in message


def test_with_fail_on_data_loss_false_the_query_reads_on_from_the_earliest_offset(spark, kafka_bootstrap,
                                                                                  deleted_under_a_stopped_query):
    topic, checkpoint = deleted_under_a_stopped_query
    assert run_available(spark, kafka_bootstrap, topic, checkpoint, failOnDataLoss="false") == list(range(15, 20))


def test_records_deleted_inside_a_planned_batch(spark, kafka_bootstrap, tmp_path):
    """The batch was planned (offsets/N written) over records that are deleted before it runs: on restart Spark
    re-runs the planned batch, whose range now starts below the low watermark."""
    topic = create_topic(kafka_bootstrap, unique("data-loss-planned"), 1)
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(10)], partition=0)
    checkpoint = tmp_path / "ckpt"
    assert run_available(spark, kafka_bootstrap, topic, str(checkpoint)) == list(range(10))
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(10, 20)], partition=0)
    # Batch 1 planned over 10-19 but never committed, as a driver killed mid-batch leaves it.
    offsets_1 = (checkpoint / "offsets" / "0").read_text().replace('"0":10', '"0":20')
    (checkpoint / "offsets" / "1").write_text(offsets_1)
    delete_records_before(kafka_bootstrap, topic, 0, 13)
    with pytest.raises(Exception, match=f"data loss on {topic}:0"):
        run_available(spark, kafka_bootstrap, topic, str(checkpoint), readMode="executors")
    assert run_available(spark, kafka_bootstrap, topic, str(checkpoint), failOnDataLoss="false",
                         readMode="executors") == list(range(13, 20))


def test_verify_calls_the_partition_out_of_range_and_reset_to_earliest_lets_the_job_run(spark, kafka_bootstrap,
                                                                                      tmp_path, capsys):
    topic = create_topic(kafka_bootstrap, unique("data-loss-job"), 2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"r{p}-{i}") for i in range(6)], partition=p)
    job = make_job(spark, kafka_bootstrap, tmp_path / "home", {topic: 2})
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"r{p}-{i}") for i in range(6, 12)], partition=p)
    delete_records_before(kafka_bootstrap, topic, 0, 9)
    home = ["--job-home", str(job.home)]

    verified = cli(capsys, "verify", *home, "--json")
    assert verified.code != 0
    statuses = {(r["topic"], r["partition"]): r["status"] for r in verified.json()["partitions"]}
    assert statuses[(topic, 0)] == "OUT_OF_RANGE", verified.out
    assert statuses[(topic, 1)] != "OUT_OF_RANGE"

    done = cli(capsys, "reset", *home, "--to-earliest", "--execute")
    assert done.code == 0, done.err
    assert job.position() == {TopicPartition(topic, 0): 9, TopicPartition(topic, 1): 0}
    rows = consume(spark, job)
    assert sorted((p, o) for _, p, o in rows) == [(0, o) for o in range(9, 12)] + [(1, o) for o in range(12)]


def test_a_job_that_skips_lost_offsets_records_the_range_in_its_history_and_status(spark, kafka_bootstrap,
                                                                                  tmp_path):
    """failOnDataLoss=false under the job runtime: the job reads on, and what it did not read is on record."""
    from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime
    from airflow_kafka_stream.storage.jobhome import JobHome

    topic = create_topic(kafka_bootstrap, unique("data-loss-runtime"), 1)
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(10)], partition=0)
    home = str(tmp_path / "home")

    def run_job() -> int:
        config = StreamConfig(job_name="skips", bootstrap_servers=kafka_bootstrap, group_id=unique("skips"),
                              topics=[topic], starting_offsets="earliest",
                              source_options={"failOnDataLoss": "false"})
        runtime = StreamRuntime(spark, home, config)
        result = runtime.run(runtime.read_stream().writeStream.format("noop").trigger(availableNow=True))
        assert result.exit_code == 0, result.summary()
        return result.records

    assert run_job() == 10
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(10, 20)], partition=0)
    delete_records_before(kafka_bootstrap, topic, 0, 15)
    assert run_job() == 5

    job = JobHome(home)
    skipped = [r for r in job.history() if r["operation"] == "data_loss_skipped"]
    assert len(skipped) == 1, job.history()
    assert skipped[0]["args"] == {"partition": f"{topic}:0"}
    assert (skipped[0]["after"]["first"], skipped[0]["after"]["resumed_at"], skipped[0]["after"]["offsets"]) == (10, 15, 5)
    assert "deleted" in skipped[0]["after"]["reason"]
    status = job.status()
    assert status["skipped_offsets"]["offsets"] == 5 and status["skipped_offsets"]["ranges"] == 1
    assert not list((tmp_path / "home" / "control").glob("skipped-*")), "each report is moved into the history once"
