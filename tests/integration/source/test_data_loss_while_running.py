"""Records or a whole topic deleted while a query runs, between two of its batches, on the real broker.

Batch 0 reads offsets 0-9; while it is being written (after it was planned, before batch 1 is), ten more records
arrive and an operator deletes records (DeleteRecords to offset 15) or the topic. Batch 1 is planned against
what Kafka holds then. With ``failOnDataLoss=true`` (the default) the query fails naming the partition, what was
lost and the way out; with ``false`` it reads on from what Kafka still has (records) or without the partition
(topic), and never rereads or invents a record.

With ``readMode=executors`` batch 1's tasks ask Kafka, so the loss is always seen. By default a small batch is
read by consumers the driver keeps, which may have fetched records 10-19 in the instant between their produce
and their deletion: those records were read before they were gone, and the job delivers them once. Either way
no record is skipped without the query failing (default) or its range being skipped by choice (``false``).
"""

from __future__ import annotations

import threading

import pytest
from pyspark.errors import StreamingQueryException

from tests.integration.source.test_data_loss import delete_records_before
from tests.integration.source.test_source_reading import stream
from tests.kafka_utils import create_topic, delete_topic, produce, unique

pytestmark = pytest.mark.integration


def run_until(spark, bootstrap: str, topic: str, checkpoint: str, during_batch_0, batches: int, linger: float = 0.0,
              **options: str):
    """A continuously triggered query; ``during_batch_0`` runs inside batch 0's sink, after its rows were read.
    Returns the offsets read and the query's error (None when it ran ``batches`` batches, then ``linger`` seconds
    of triggers, and was stopped)."""
    offsets: list[int] = []
    done = threading.Event()

    def sink(batch, batch_id: int) -> None:
        offsets.extend(row.offset for row in batch.collect())
        if batch_id == 0:
            during_batch_0()
        if batch_id + 1 >= batches:
            done.set()

    query = (stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", **options)
             .writeStream.foreachBatch(sink).trigger(processingTime="500 milliseconds")
             .option("checkpointLocation", checkpoint).start())
    try:
        while not done.is_set() and query.isActive:
            query.awaitTermination(0.5)
        if query.isActive and linger:
            query.awaitTermination(linger)
    except StreamingQueryException:
        pass  # returned below from query.exception()
    finally:
        if query.isActive:
            query.stop()
    return sorted(offsets), query.exception()


@pytest.fixture
def topic(kafka_bootstrap):
    name = create_topic(kafka_bootstrap, unique("loss-running"), 1)
    produce(kafka_bootstrap, name, [(None, f"r{i}") for i in range(10)], partition=0)
    return name


def ten_more_then_delete_to_15(bootstrap: str, topic: str):
    def act() -> None:
        produce(bootstrap, topic, [(None, f"r{i}") for i in range(10, 20)], partition=0)
        delete_records_before(bootstrap, topic, 0, 15)
    return act


@pytest.mark.parametrize("read_mode", ["executors", "auto"])
def test_records_deleted_between_two_batches_fail_the_query_naming_them(spark, kafka_bootstrap, topic, tmp_path,
                                                                       read_mode):
    offsets, error = run_until(spark, kafka_bootstrap, topic, str(tmp_path / "ckpt"),
                               ten_more_then_delete_to_15(kafka_bootstrap, topic), batches=2, readMode=read_mode)
    if error is None:  # only when the driver's consumers fetched 10-19 before the deletion: nothing was lost
        assert read_mode == "auto" and offsets == list(range(20)), offsets
        return
    assert offsets == list(range(10)), "batch 0 committed; nothing after it was read"
    message = str(error)
    assert f"data loss on {topic}:0" in message and "offsets 10..14 were deleted" in message, message
    assert "failOnDataLoss=false" in message and "reset" in message, message


@pytest.mark.parametrize("read_mode", ["executors", "auto"])
def test_records_deleted_between_two_batches_are_skipped_with_fail_on_data_loss_false(spark, kafka_bootstrap, topic,
                                                                                      tmp_path, read_mode):
    offsets, error = run_until(spark, kafka_bootstrap, topic, str(tmp_path / "ckpt"),
                               ten_more_then_delete_to_15(kafka_bootstrap, topic), batches=2,
                               failOnDataLoss="false", readMode=read_mode)
    assert error is None, error
    assert len(offsets) == len(set(offsets)), "a record read twice"
    skipped = list(range(10)) + list(range(15, 20))
    assert offsets == skipped or (read_mode == "auto" and offsets == list(range(20))), offsets


def test_a_topic_deleted_between_two_batches_fails_the_query_naming_it(spark, kafka_bootstrap, topic, tmp_path):
    offsets, error = run_until(spark, kafka_bootstrap, topic, str(tmp_path / "ckpt"),
                               lambda: delete_topic(kafka_bootstrap, topic), batches=2)
    assert offsets == list(range(10))
    assert error is not None, "the query ran on without its topic"
    message = str(error)
    assert f"data loss on {topic}:0" in message and "no longer exists" in message, message


def test_a_topic_deleted_between_two_batches_is_dropped_with_fail_on_data_loss_false(spark, kafka_bootstrap, topic,
                                                                                    tmp_path):
    """Spark's own connector drops a deleted topic's partitions from a subscription when data loss is allowed:
    the query plans on (ten triggers without the topic) and reads nothing twice."""
    offsets, error = run_until(spark, kafka_bootstrap, topic, str(tmp_path / "ckpt"),
                               lambda: delete_topic(kafka_bootstrap, topic), batches=1, linger=5.0,
                               failOnDataLoss="false")
    assert error is None, error
    assert offsets == list(range(10))
