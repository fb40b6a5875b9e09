"""Transactions still open while the source plans and reads: the last stable offset, on the real broker.

Under ``kafka.isolation.level=read_committed`` no record past the last stable offset (LSO: the first offset of
the oldest open transaction) may be read yet. A source that planned to the high watermark would wait for records
it cannot get; one that planned past the LSO and read at ``read_uncommitted`` would return records that may
still be aborted. So the source plans to the LSO, an ``availableNow`` query ends there while another producer
holds a transaction open, and the next run picks the rest up once it commits. A transaction left open by a
producer that vanished is aborted by the broker at its timeout: the job then reads on, past its records.
Under ``read_uncommitted`` (Spark's default) the open transaction's records are read, as Spark's own connector
reads them.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition
from tests.integration.source.test_source_reading import stream
from tests.integration.source.test_transaction_markers import run_within_deadline
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

def transactional(bootstrap: str, **extra: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"open-txn-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 0, "log_level": 3, **extra})
    producer.init_transactions(30)
    return producer


def send(producer: Producer, bootstrap: str, topic: str, values: list[str], commit: bool | None) -> None:
    """Send ``values`` in a new transaction and commit it, abort it, or (None) leave it open; return once the
    partition's high watermark shows them (and the marker: the coordinator writes it after the commit returns)."""
    before = watermarks(bootstrap, topic, 1)[0][1]
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    producer.flush(30)
    if commit is True:
        producer.commit_transaction(30)
    elif commit is False:
        producer.abort_transaction(30)
    wait_high(bootstrap, topic, before + len(values) + (commit is not None))


def wait_high(bootstrap: str, topic: str, high: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (found := watermarks(bootstrap, topic, 1)[0][1]) < high:
        assert time.monotonic() < deadline, f"{topic}: high watermark {found}, expected {high}"
        time.sleep(0.05)


def read_available(spark, bootstrap: str, topic: str, checkpoint: str, **options: str) -> list[bytes]:
    """One availableNow run from earliest (or the checkpoint): the values read, in offset order.
    Fails when the run has not ended within the deadline (it waited for records it cannot read)."""
    rows: list = []
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="2",
                **{"kafkaConsumer.pollTimeoutMs": "20000", **options})
    run_within_deadline(df.writeStream.foreachBatch(
        lambda batch, _id: rows.extend(batch.select("offset", "value").collect())), checkpoint)
    return [bytes(r.value) for r in sorted(rows, key=lambda r: r.offset)]


def position(checkpoint: str, topic: str) -> int:
    return read_position(checkpoint).source_offsets(0)[TopicPartition(topic, 0)]


def test_read_committed_stops_at_an_open_transaction_and_reads_on_once_it_commits(spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("open-txn"), 1)
    # The holder's transaction stays open across a whole query run: far within its timeout.
    first, later = transactional(kafka_bootstrap), transactional(kafka_bootstrap)
    holder = transactional(kafka_bootstrap, **{"transaction.timeout.ms": 600_000})
    send(first, kafka_bootstrap, topic, ["a0", "a1", "a2"], commit=True)        # offsets 0-2, marker 3
    send(holder, kafka_bootstrap, topic, ["h0", "h1"], commit=None)             # offsets 4-5, open: the LSO stays at 4
    send(later, kafka_bootstrap, topic, ["b0", "b1"], commit=True)              # offsets 6-7, marker 8: committed, but past the LSO
    assert watermarks(kafka_bootstrap, topic, 1)[0][1] == 9
    checkpoint = str(tmp_path / "ckpt")
    options = {"kafka.isolation.level": "read_committed"}

    assert read_available(spark, kafka_bootstrap, topic, checkpoint, **options) == [b"a0", b"a1", b"a2"]
    assert position(checkpoint, topic) == 4, "the checkpoint ends at the last stable offset, not the watermark"

    holder.commit_transaction(30)                               # marker 9: the LSO moves to the end, 10
    wait_high(kafka_bootstrap, topic, 10)
    assert read_available(spark, kafka_bootstrap, topic, checkpoint, **options) == [b"h0", b"h1", b"b0", b"b1"]
    assert position(checkpoint, topic) == 10


def test_read_uncommitted_reads_an_open_transaction_as_sparks_connector_does(spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("open-txn-ru"), 1)
    first, holder = transactional(kafka_bootstrap), transactional(kafka_bootstrap, **{"transaction.timeout.ms": 600_000})
    send(first, kafka_bootstrap, topic, ["a0"], commit=True)                    # offset 0, marker 1
    send(holder, kafka_bootstrap, topic, ["h0", "h1"], commit=None)             # offsets 2-3, open
    send(first, kafka_bootstrap, topic, ["x0"], commit=False)                   # offset 4, aborted: marker 5
    checkpoint = str(tmp_path / "ckpt")
    assert read_available(spark, kafka_bootstrap, topic, checkpoint) == [b"a0", b"h0", b"h1", b"x0"]
    assert position(checkpoint, topic) == 6
    holder.abort_transaction(30)


def test_a_transaction_its_producer_abandoned_is_aborted_at_its_timeout_and_the_job_reads_on(spark, kafka_bootstrap,
                                                                                           tmp_path):
    topic = create_topic(kafka_bootstrap, unique("abandoned-txn"), 1)
    committed = transactional(kafka_bootstrap)
    abandoned = transactional(kafka_bootstrap, **{"transaction.timeout.ms": 10_000})
    send(committed, kafka_bootstrap, topic, ["a0"], commit=True)        # offset 0, marker 1
    send(abandoned, kafka_bootstrap, topic, ["z0", "z1"], commit=None)  # offsets 2-3: never committed
    send(committed, kafka_bootstrap, topic, ["b0"], commit=True)        # offset 4, marker 5
    checkpoint = str(tmp_path / "ckpt")
    options = {"kafka.isolation.level": "read_committed"}
    first = read_available(spark, kafka_bootstrap, topic, checkpoint, **options)
    # While the transaction is open the run ends at its first offset; on a loaded machine the broker may already
    # have aborted it (10 s), and the run reads past it. Either way it ends, and never returns its records.
    assert (first, position(checkpoint, topic)) in (([b"a0"], 2), ([b"a0", b"b0"], 7))

    wait_high(kafka_bootstrap, topic, 7)                                # the broker's abort marker, at offset 6
    rest = read_available(spark, kafka_bootstrap, topic, checkpoint, **options)
    assert first + rest == [b"a0", b"b0"]
    assert position(checkpoint, topic) == 7
    del abandoned
