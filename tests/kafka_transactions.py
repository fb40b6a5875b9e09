"""Topics with real Kafka's offset gaps: transactions, committed and aborted, whose markers take offsets.

Every commit or abort writes one control record (a marker) into each partition
the transaction touched; it takes an offset that no consumer ever sees as a
record. These helpers produce against the test broker (Apache Kafka, or the
cluster KAFKA_BOOTSTRAP_SERVERS names).

A script of :class:`Send` and :class:`End` steps is played with transactional
producers, one step at a time (each send is flushed, so the order on each
partition is the script's). The expected layout (each record's offset, each
marker's offset, the high watermarks) is computed from the script and then
checked against what the cluster holds, so tests compare with offsets the
cluster really has.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.kafka_utils import create_topic, unique

#: Partitions of every topic the scripts play into.
PARTITIONS = 4


@dataclass(frozen=True)
class TransactionalCluster:
    """Where transactions go: a cluster whose ``read_committed`` hides aborted records."""

    bootstrap: str


@dataclass(frozen=True)
class Send:
    """Producer ``producer`` sends ``value`` to ``partition`` in its open transaction (begun on first send)."""

    producer: str
    partition: int
    value: str


@dataclass(frozen=True)
class End:
    """Producer ``producer`` commits (or aborts) its open transaction: a marker in each partition it touched."""

    producer: str
    commit: bool


def transaction(producer: str, records: dict[int, Sequence[str]], commit: bool) -> list[Send | End]:
    """One transaction of ``producer``: its records per partition, then its commit or abort."""
    steps: list[Send | End] = [Send(producer, p, v) for p, values in sorted(records.items()) for v in values]
    return [*steps, End(producer, commit)]


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    value: bytes
    committed: bool


@dataclass
class TransactionalTopic:
    """A topic and what the script put in it: records, marker offsets and high watermarks per partition."""

    cluster: TransactionalCluster
    name: str
    partitions: int
    records: list[Record] = field(default_factory=list)
    markers: dict[int, list[int]] = field(default_factory=dict)
    high: dict[int, int] = field(default_factory=dict)

    def expected(self, read_committed: bool = False) -> list[tuple[int, int, bytes]]:
        """(partition, offset, value) a read from offset 0 to the end returns, in partition and offset order."""
        hidden = read_committed
        return sorted((r.partition, r.offset, r.value) for r in self.records if r.committed or not hidden)

    def nested_high(self) -> dict[str, dict[str, int]]:
        """The high watermarks in the checkpoint's JSON shape."""
        return {self.name: {str(p): o for p, o in sorted(self.high.items())}}

    def first_record_at_or_after(self, partition: int, offset: int) -> Record | None:
        """The first real record (never a marker) at or after ``offset``: where a read from there starts."""
        found = [r for r in self.records if r.partition == partition and r.offset >= offset]
        return min(found, key=lambda r: r.offset) if found else None

    def is_marker(self, partition: int, offset: int) -> bool:
        return offset in self.markers.get(partition, [])


def new_topic(cluster: TransactionalCluster, prefix: str) -> TransactionalTopic:
    """A fresh topic of PARTITIONS partitions."""
    name = create_topic(cluster.bootstrap, unique(prefix), PARTITIONS)
    return TransactionalTopic(cluster, name, PARTITIONS, high=dict.fromkeys(range(PARTITIONS), 0))


def play(topic: TransactionalTopic, steps: Iterable[Send | End], timeout: float = 30.0) -> TransactionalTopic:
    """Play ``steps`` into ``topic`` and extend its expected layout; check the cluster holds exactly that."""
    steps = list(steps)
    producers: dict[str, Producer] = {}
    open_partitions: dict[str, set[int]] = {}
    added: list[Record] = []
    pending: dict[str, list[int]] = {}  # producer -> indexes into ``added`` of its open transaction
    try:
        for step in steps:
            producer = producers.get(step.producer)
            if producer is None:
                producer = Producer({"bootstrap.servers": topic.cluster.bootstrap, "log_level": 3, "linger.ms": 0,
                                     "transactional.id": f"{topic.name}-{step.producer}-{uuid.uuid4().hex[:6]}"})
                producer.init_transactions(timeout)
                producers[step.producer] = producer
            if isinstance(step, Send):
                if step.producer not in open_partitions:
                    producer.begin_transaction()
                    open_partitions[step.producer] = set()
                open_partitions[step.producer].add(step.partition)
                producer.produce(topic.name, value=step.value.encode(), partition=step.partition)
                assert producer.flush(timeout) == 0, f"{step} not delivered within {timeout}s"
                offset = topic.high[step.partition]
                topic.high[step.partition] = offset + 1
                pending.setdefault(step.producer, []).append(len(added))
                added.append(Record(step.partition, offset, step.value.encode(), committed=False))
            else:
                if step.commit:
                    producer.commit_transaction(timeout)
                else:
                    producer.abort_transaction(timeout)
                for index in pending.pop(step.producer, []):
                    record = added[index]
                    added[index] = Record(record.partition, record.offset, record.value, committed=step.commit)
                for partition in sorted(open_partitions.pop(step.producer)):
                    topic.markers.setdefault(partition, []).append(topic.high[partition])
                    topic.high[partition] += 1
        assert not open_partitions, f"the script leaves transactions open: {sorted(open_partitions)}"
    finally:
        for producer in producers.values():
            producer.flush(5)
    topic.records.extend(added)
    _check_layout(topic, timeout)
    return topic


def _check_layout(topic: TransactionalTopic, timeout: float) -> None:
    """The cluster's watermarks and records match the expected layout (markers are written asynchronously)."""
    consumer = Consumer({"bootstrap.servers": topic.cluster.bootstrap, "group.id": unique("layout"), "log_level": 3,
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                         "enable.partition.eof": True})
    try:
        deadline = time.monotonic() + timeout
        while True:
            highs = {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic.name, p), timeout=5)[1]
                     for p in range(topic.partitions)}
            if highs == topic.high:
                break
            assert time.monotonic() < deadline, f"high watermarks {highs}, expected {topic.high}"
            time.sleep(0.1)
        consumer.assign([KafkaTopicPartition(topic.name, p, 0) for p in range(topic.partitions)])
        read: list[tuple[int, int, bytes]] = []
        done: set[int] = {p for p, high in topic.high.items() if high == 0}
        while len(done) < topic.partitions:
            assert time.monotonic() < deadline, f"reading the layout back: only {sorted(done)} reached the end"
            for msg in consumer.consume(100, 0.5):
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    done.add(msg.partition())
                else:
                    read.append((msg.partition(), msg.offset(), msg.value()))
        assert sorted(read) == topic.expected(), "the cluster's records differ from the script's layout"
    finally:
        consumer.close()


def transaction_state(bootstrap: str, transactional_id: str) -> dict[str, str]:
    """Kafka's own description of a transactional id (``kafka-transactions.sh describe``, the tool in the broker's
    jars): ``TransactionState`` (``Ongoing`` while a transaction is open; ``CompleteCommit``, ``CompleteAbort``,
    ``Empty`` otherwise), its producer id and epoch, and the partitions of an open transaction."""
    from airflow_kafka_stream.devstack.broker import broker_jars, java_command

    done = subprocess.run([java_command(), "-Xmx128m", "-cp", f"{broker_jars()}/*",
                           "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap, "describe",
                           "--transactional-id", transactional_id], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kafka-transactions describe failed: {done.stderr[-2000:]}"
    header, row = [line for line in done.stdout.splitlines() if line.strip()][:2]
    return dict(zip(header.split(), row.split(), strict=False))

