"""Planning a batch from scripted broker answers: an invalid watermark (librdkafka's -1001 under
broker overload) is asked again, never read as data loss and never moves the query's position.
A real broker cannot be made to answer -1001 on demand, so the lookup client's answers are scripted here;
the same functions are run against a real broker in tests/integration/kafka/test_kafka_metadata.py."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import KafkaAccessError
from airflow_kafka_stream.kafka import metadata
from airflow_kafka_stream.source.source_options import parse_source_options
from airflow_kafka_stream.source.stream_reader import KafkaStreamReader

KIND = {metadata.EARLIEST: "low", metadata.LATEST: "high"}


class ScriptedLookup:
    """Answers ListOffsets (a lookup consumer's ``offsets_for_times``) from a script of rounds; a round maps
    (partition, kind) to (offset, timestamp).

    A round is used up when its "high" question was answered; the last round repeats.
    """

    def __init__(self, *rounds: dict) -> None:
        self.rounds = list(rounds)
        self.questions: list[tuple[str, list[int]]] = []

    def offsets_for_times(self, request, timeout=None):
        (kind,) = {KIND.get(ktp.offset, "time") for ktp in request}
        self.questions.append((kind, sorted(ktp.partition for ktp in request)))
        answers = self.rounds[0]
        if kind == "high" and len(self.rounds) > 1:
            self.rounds.pop(0)
        return [KafkaTopicPartition(ktp.topic, ktp.partition, answers[(ktp.partition, kind)][0]) for ktp in request]


def answers(**by_partition: tuple[int, int]) -> dict:
    """p0=(low, high), p1=... as one round of answers."""
    round_ = {}
    for name, (low, high) in by_partition.items():
        round_[(int(name[1:]), "low")] = (low, -1)
        round_[(int(name[1:]), "high")] = (high, -1)
    return round_


@pytest.fixture
def admin(monkeypatch):
    def install(*rounds: dict) -> ScriptedLookup:
        scripted = ScriptedLookup(*rounds)
        monkeypatch.setattr(metadata, "_lookup", lambda config: scripted)
        monkeypatch.setattr(metadata, "list_topic_partitions", lambda config, **kw: {"t": 2})
        return scripted

    return install


def reader(**options: str) -> KafkaStreamReader:
    return KafkaStreamReader(parse_source_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", **options}))


START = {"t": {"0": 5, "1": 5}}


@pytest.mark.parametrize("fail", ["true", "false"])
def test_an_invalid_end_offset_is_asked_again_before_planning(admin, fail):
    """The acceptance run's case: "needs offset 5 but Kafka holds [0, -1001) (the end offset went backwards)"."""
    scripted = admin(answers(p0=(0, 9), p1=(0, -1001)), answers(p1=(0, 9)))
    assert reader(failOnDataLoss=fail).latestOffset(START, ReadAllAvailable()) == {"t": {"0": 9, "1": 9}}
    assert scripted.questions == [("low", [0, 1]), ("high", [0, 1]), ("low", [1]), ("high", [1])]


@pytest.mark.parametrize("fail", ["true", "false"])
def test_invalid_answers_that_persist_fail_the_trigger_as_a_kafka_error_and_never_move_the_position(admin, fail):
    """With failOnDataLoss=false, taking [0, -1001) as "topic recreated" would restart the partition at 0 and
    replay offsets 0..4: the query must fail (Spark retries it from its checkpoint) instead."""
    admin(answers(p0=(0, 9), p1=(0, -1001)))
    with pytest.raises(KafkaAccessError, match=r"t:1: \[0, -1001 \(OFFSET_INVALID\)\).*not data loss"):
        reader(failOnDataLoss=fail, **{"kafkaConsumer.pollTimeoutMs": "300"}).latestOffset(START, ReadAllAvailable())


def test_a_new_partition_never_starts_at_a_marker(admin):
    """A partition that appeared since the last batch starts at its low watermark: -1001 there is no offset."""
    scripted = admin(answers(p1=(-1001, 9)), answers(p1=(0, 9)))
    ranges = reader().partitions({"t": {"0": 5}}, {"t": {"0": 9, "1": 9}})
    assert [(r.partition, r.start, r.end) for task in ranges for r in task.ranges] == [(0, 5, 9), (1, 0, 9)]
    assert scripted.questions == [("low", [1]), ("high", [1])] * 2


def test_offsets_for_times_ask_again_on_an_invalid_answer(admin):
    """-1 means "no record at or after the time" (the end); -1001 means nothing and is asked again."""
    scripted = admin(
        {(0, "time"): (-1001, -1), (0, "high"): (9, -1), (1, "time"): (-1, -1), (1, "high"): (9, -1)},
        {(0, "time"): (4, 2_000), (0, "high"): (9, -1), (1, "time"): (-1, -1), (1, "high"): (9, -1)},
    )
    found = metadata.offsets_for_timestamps({"bootstrap.servers": "b:9092"}, {TopicPartition("t", 0): 1_000,
                                                                             TopicPartition("t", 1): 1_000})
    assert found == {TopicPartition("t", 0): 4, TopicPartition("t", 1): 9}
    assert scripted.questions[2:] == [("time", [0]), ("high", [0])]


@pytest.mark.parametrize(
    "options, tasks",
    [
        pytest.param({}, [[(0, 5, 9), (1, 0, 9)]], id="small-batch-one-task"),
        pytest.param({"minRecordsPerTask": "1"}, [[(0, 5, 9)], [(1, 0, 9)]], id="a-task-per-partition"),
        pytest.param({"minPartitions": "2"}, [[(0, 5, 9)], [(1, 0, 9)]], id="the-user-chose-the-parallelism"),
    ],
)
def test_small_ranges_share_a_task(options, tasks):
    """No Kafka request here: both partitions are known, and the consumer cache (topic ids) is off."""
    planned = reader(**options).partitions({"t": {"0": 5, "1": 0}}, {"t": {"0": 9, "1": 9}})
    assert [[(r.partition, r.start, r.end) for r in task.ranges] for task in planned] == tasks
