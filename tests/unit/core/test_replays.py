"""A Kafka sink that skips replays: which rows it writes and what it commits as written through."""

from __future__ import annotations

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.replays import ReplayFilter, trusted_written_through

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def test_a_replayed_record_is_skipped_and_a_new_one_written_and_only_progress_is_committed():
    batch = ReplayFilter({A0: 10, A1: 5}, skip=True)
    kept = [offset for offset in range(8, 12) if batch.keep(A0, offset)]
    assert kept == [10, 11] and batch.skipped == 2
    assert batch.keep(A1, 3) is False
    assert batch.advanced() == {A0: 12}, "a partition the batch does not move past its mark is not committed"


def test_without_skipping_every_row_is_written_and_the_marks_still_advance():
    batch = ReplayFilter({A0: 10}, skip=False)
    assert all(batch.keep(A0, offset) for offset in range(8, 13))
    assert batch.skipped == 0 and batch.advanced() == {A0: 13}


def test_a_partition_never_written_starts_at_nothing_skipped():
    batch = ReplayFilter({}, skip=True)
    assert batch.keep(A1, 0) and batch.advanced() == {A1: 1}


def test_a_mark_past_the_partitions_end_is_not_trusted_and_says_why():
    trusted, warnings = trusted_written_through({A0: 50, A1: 7, TopicPartition("b", 0): None}, {A0: 20, A1: 9})
    assert trusted == {A1: 7}
    assert len(warnings) == 1 and "a:0" in warnings[0] and "created again" in warnings[0]


def test_marks_filled_in_after_the_batch_began_are_used_for_its_rows():
    """The sink reads a topic's marks when its first row arrives: the driver's first batch after a rewind."""
    marks: dict = {}
    batch = ReplayFilter(marks, skip=True)
    marks[A0] = 5
    assert not batch.keep(A0, 4) and batch.keep(A0, 5)
