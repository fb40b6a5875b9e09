"""The read loop's decisions over scripted polls: the cases a test broker cannot produce
(a client reset below the range, a deleted partition, transient errors, offset gaps).
The polls themselves are tested against a real broker in tests/integration/source/test_partition_readers.py."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError

from airflow_kafka_stream.errors import DataLossError, KafkaAccessError
from airflow_kafka_stream.source import arrow_rows
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.partition_polls import Polled
from airflow_kafka_stream.source.source_options import parse_source_options

RANGE = OffsetRange("t", 0, 10, 20)


class ScriptedPartition:
    """Answers polls from a script; an exhausted script answers "nothing yet"."""

    def __init__(self, *polls: Polled, watermarks: tuple[int, int] | list[tuple[int, int]] = (0, 20),
                 cached: tuple[int, int] | None = None) -> None:
        self.polls = list(polls)
        self.cached = cached  # the watermarks of the last fetch answer; None: no answer yet
        self.marks = list(watermarks) if isinstance(watermarks, list) else [watermarks]  # the last one repeats
        self.asked: list[int] = []
        self.watermark_questions = 0

    def poll(self, max_messages: int, timeout: float, end: int) -> Polled:
        self.asked.append(max_messages)
        return self.polls.pop(0) if self.polls else Polled(None, -1, -1, [], False)

    def watermarks(self, timeout: float) -> tuple[int, int]:
        self.watermark_questions += 1
        return self.marks.pop(0) if len(self.marks) > 1 else self.marks[0]

    def cached_watermarks(self) -> tuple[int, int] | None:
        return self.cached

    def close(self) -> None:
        pass


def records(*offsets: int) -> Polled:
    batch = pa.RecordBatch.from_arrays([pa.array(list(offsets), pa.int64())], names=["offset"])
    return Polled(batch, offsets[0], offsets[-1], [], False)


def event(code: int, offset: int, then: Polled | None = None) -> Polled:
    base = then or Polled(None, -1, -1, [], False)
    return base._replace(events=[(KafkaError(code, "scripted"), offset)])


def read(partition: ScriptedPartition, reopened: list | None = None, **options: str) -> list[int]:
    """The offsets the read loop hands out; ``reopened`` collects (offset, fetch wait) of each reopening,
    which answers from the same script."""
    opts = parse_source_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", **options})

    def reopen(position: int, wait: int) -> ScriptedPartition:
        (reopened if reopened is not None else []).append((position, wait))
        return partition

    reading = arrow_rows.PartitionRead(partition, arrow_rows.first_fetch_wait_ms(opts), reopen)
    return [o for batch in arrow_rows.read_polls(reading, opts, RANGE) for o in batch.column("offset").to_pylist()]


def test_range_read_in_polls_sized_to_what_is_left():
    partition = ScriptedPartition(records(10, 11, 12), records(13, 14, 15, 16, 17, 18, 19))
    assert read(partition) == list(range(10, 20))
    assert partition.asked == [10, 7]


def test_offset_gaps_then_a_record_past_the_end_complete_the_range():
    """Compaction or transaction markers leave gaps; a record at or past the end proves nothing is left."""
    partition = ScriptedPartition(records(10, 12, 15), Polled(None, -1, -1, [], True))
    assert read(partition) == [10, 12, 15]


def test_end_of_partition_at_the_end_completes_the_range():
    partition = ScriptedPartition(event(KafkaError._PARTITION_EOF, 20, then=records(17, 19)))
    assert read(partition) == [17, 19]


def test_end_of_partition_below_the_end_waits_when_the_end_exists():
    partition = ScriptedPartition(
        event(KafkaError._PARTITION_EOF, 15, then=records(10, 11, 12, 13, 14)), records(15, 16, 17, 18, 19)
    )
    assert read(partition) == list(range(10, 20))


def test_end_of_partition_events_the_read_has_passed_ask_the_broker_nothing():
    """A kept consumer at the log's end of a trickling topic queues such an event with every empty fetch; each
    question would wait behind the consumer's own long poll."""
    partition = ScriptedPartition(event(KafkaError._PARTITION_EOF, 12, then=records(10, 11, 12, 13, 14)),
                                  event(KafkaError._PARTITION_EOF, 14, then=records(15, 16, 17, 18, 19)))
    assert read(partition) == list(range(10, 20))
    assert partition.watermark_questions == 0


def test_an_end_the_last_fetch_answer_already_passed_asks_the_broker_nothing():
    partition = ScriptedPartition(event(KafkaError._PARTITION_EOF, 15, then=records(10, 11, 12, 13, 14)),
                                  records(15, 16, 17, 18, 19), cached=(0, 25))
    assert read(partition) == list(range(10, 20))
    assert partition.watermark_questions == 0


@pytest.mark.parametrize("fail", ["true", "false"])
def test_partition_that_now_ends_short_is_data_loss(fail):
    def partition():
        # The last fetch answer saw the same short end: the broker is asked, and it confirms.
        return ScriptedPartition(event(KafkaError._PARTITION_EOF, 14, then=records(10, 11, 12, 13)), watermarks=(0, 14),
                                 cached=(0, 14))

    if fail == "true":
        with pytest.raises(DataLossError, match=r"needs offsets 14\.\.19 but Kafka holds \[0, 14\)"):
            read(partition())
    else:
        assert read(partition(), failOnDataLoss="false") == [10, 11, 12, 13]


@pytest.mark.parametrize("fail", ["true", "false"])
def test_records_below_the_range_after_a_client_reset_are_not_the_range(fail):
    """A recreated topic: the client went back to earliest, and offsets 0.. belong to new data."""

    def partition():
        return ScriptedPartition(records(0, 1, 2), records(3, 4), watermarks=(0, 5))

    if fail == "true":
        with pytest.raises(DataLossError, match=r"needs offsets 10\.\.19 but Kafka holds \[0, 5\) \(the partition was reset"):
            read(partition())
    else:
        assert read(partition(), failOnDataLoss="false") == []


@pytest.mark.parametrize("fail", ["true", "false"])
def test_deleted_partition_is_data_loss(fail):
    def partition():
        return ScriptedPartition(records(10, 11), event(KafkaError.UNKNOWN_TOPIC_OR_PART, 12))

    if fail == "true":
        with pytest.raises(DataLossError, match=r"needs offsets 12\.\.19 but Kafka no longer has the partition"):
            read(partition())
    else:
        assert read(partition(), failOnDataLoss="false") == [10, 11]


def test_transient_client_errors_are_waited_out():
    partition = ScriptedPartition(
        event(KafkaError._TRANSPORT, -1), event(KafkaError._ALL_BROKERS_DOWN, -1), records(*range(10, 20))
    )
    assert read(partition) == list(range(10, 20))


def test_other_client_errors_fail_the_read_naming_partition_and_offset():
    partition = ScriptedPartition(records(10, 11), event(KafkaError.TOPIC_AUTHORIZATION_FAILED, 12))
    with pytest.raises(KafkaAccessError, match=r"reading t:0 at offset 12 failed"):
        read(partition)


def test_waiting_is_bounded_by_poll_timeout_even_with_transient_errors():
    partition = ScriptedPartition(*[event(KafkaError._TRANSPORT, -1) for _ in range(1000)])
    with pytest.raises(KafkaAccessError, match=r"no records from t:0 at offset 10 for 0s .*kafkaConsumer.pollTimeoutMs"):
        read(partition, **{"kafkaConsumer.pollTimeoutMs": "50"})


@pytest.mark.parametrize("fail", ["true", "false"])
def test_an_invalid_watermark_answer_is_asked_again_not_taken_as_loss(fail):
    """Under broker overload librdkafka can answer -1001 (OFFSET_INVALID): that says nothing about the partition.
    Taken as data, the end of partition at 15 looks like a partition ending before 20: loss (or, with
    failOnDataLoss=false, records silently skipped). Asked again, the broker says the end is there."""
    partition = ScriptedPartition(
        event(KafkaError._PARTITION_EOF, 15, then=records(10, 11, 12, 13, 14)),
        records(15, 16, 17, 18, 19),
        watermarks=[(0, -1001), (-1001, -1001), (0, 20)],
    )
    assert read(partition, failOnDataLoss=fail) == list(range(10, 20))
    assert partition.watermark_questions == 3


@pytest.mark.parametrize("fail", ["true", "false"])
def test_watermarks_that_stay_invalid_fail_the_read_as_a_kafka_error(fail):
    """Never data loss, and never a skipped range (with failOnDataLoss=false that would drop records)."""
    partition = ScriptedPartition(
        event(KafkaError._PARTITION_EOF, 15, then=records(10, 11, 12, 13, 14)), watermarks=(0, -1001)
    )
    with pytest.raises(KafkaAccessError, match=r"watermarks of t:0 .*-1001 \(OFFSET_INVALID\).*not data loss"):
        read(partition, failOnDataLoss=fail, **{"kafkaConsumer.pollTimeoutMs": "300"})
    assert partition.watermark_questions > 1


def test_an_invalid_answer_after_an_offset_reset_is_not_taken_as_loss():
    """An out-of-range event is checked against the watermarks; an end below the start is no answer."""
    partition = ScriptedPartition(
        event(KafkaError._AUTO_OFFSET_RESET, 10), records(*range(10, 20)), watermarks=[(30, 5), (0, 20)]
    )
    with pytest.raises(DataLossError, match=r"Kafka holds \[0, 20\)"):
        read(partition)


NOTHING = Polled(None, -1, -1, [], False)


def test_empty_answers_for_records_that_exist_raise_the_fetch_wait_step_by_step():
    """A broker answers a fetch empty when finding the records takes longer than the fetch may wait (tiered
    storage, a partition of tens of thousands of batches): the read reopens at the offset it reached with a
    longer wait, two empty polls at a time, and reads on."""
    reopened: list = []
    partition = ScriptedPartition(records(10, 11), NOTHING, NOTHING, NOTHING, NOTHING, records(12, 13, 14),
                                  NOTHING, NOTHING, records(15, 16, 17, 18, 19))
    assert read(partition, reopened) == list(range(10, 20))
    assert reopened == [(12, 50), (12, 250), (15, 1000)]


def test_a_users_fetch_wait_is_the_first_try_and_only_longer_ones_follow():
    reopened: list = []
    partition = ScriptedPartition(NOTHING, NOTHING, records(*range(10, 20)))
    assert read(partition, reopened, **{"kafka.fetch.wait.max.ms": "100"}) == list(range(10, 20))
    assert reopened == [(10, 250)]


def test_a_read_that_gets_nothing_after_every_wait_names_the_waits_and_the_settings():
    reopened: list = []
    with pytest.raises(KafkaAccessError, match=r"no records from t:0 at offset 10 .* \(fetch waits tried: 10, 50, "
                       r"250, 1000 ms\); .* kafkaConsumer.pollTimeoutMs, or kafka.fetch.wait.max.ms"):
        read(ScriptedPartition(), reopened, **{"kafkaConsumer.pollTimeoutMs": "900"})
    assert [wait for _, wait in reopened] == [50, 250, 1000]


def test_polls_with_events_are_not_empty_answers():
    """An end-of-partition below the end (records still coming) is an answer, not an empty fetch."""
    reopened: list = []
    eof = event(KafkaError._PARTITION_EOF, 10)
    partition = ScriptedPartition(eof, eof, eof, records(*range(10, 20)))
    assert read(partition, reopened) == list(range(10, 20))
    assert reopened == []
