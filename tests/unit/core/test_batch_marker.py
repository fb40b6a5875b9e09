"""The transactional sink's batch marker: generation and batch id in one committed offset."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.batch_marker import BatchMarker, marker_group, transactional_id


@pytest.mark.parametrize(("generation", "batch_id"), [(0, 0), (1, 0), (3, 17), (4095, 2 ** 39), (1, 2 ** 40 - 2)])
def test_a_marker_reads_back_from_its_offset(generation, batch_id):
    marker = BatchMarker(generation, batch_id)
    assert marker.offset() > 0 and BatchMarker.from_offset(marker.offset()) == marker


def test_no_commit_is_no_marker():
    assert BatchMarker.from_offset(None) is None and BatchMarker.from_offset(-1001) is None
    assert BatchMarker.from_offset(0) is None


def test_a_marker_covers_its_batch_and_earlier_ones_of_its_generation_only():
    marker = BatchMarker(2, 10)
    assert marker.covers(2, 10) and marker.covers(2, 3)
    assert not marker.covers(2, 11), "the next batch is written"
    assert not marker.covers(3, 0) and not marker.covers(3, 10), "a new generation starts its batch ids again"


def test_a_marker_out_of_range_is_refused_rather_than_wrapped():
    with pytest.raises(ValueError):
        BatchMarker(1, 2 ** 40).offset()
    with pytest.raises(ValueError):
        BatchMarker(-1, 0).offset()


def test_the_sinks_names_are_the_jobs_whatever_the_driver():
    assert transactional_id("orders", "orders-out") == "airflow-kafka-stream.orders.orders-out"
    assert marker_group("orders-pipeline") == "orders-pipeline.sink-markers"


def test_a_restore_counts_each_partitions_step_back_and_never_a_step_forward():
    from airflow_kafka_stream.core.offsets import TopicPartition, records_read_again

    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    current = {a0: 100, a1: 40, b0: 7}
    assert records_read_again(current, {a0: 60, a1: 50, b0: 7}) == 40, "a1 forward counts nothing"
    assert records_read_again(current, {a0: 60, TopicPartition("c", 0): 5}) == 40, "a partition new to the job"
    assert records_read_again(None, {a0: 1}) == 0
