"""A batch's transaction ends within its bound even when Kafka's client does not return.

librdkafka's ``send_offsets_to_transaction`` can block past its timeout while the group coordinator it cached is
down (librdkafka issues 5456 and 5511); the three-node failover test saw a batch hang for minutes that way. The
producer here is a stand-in whose calls block or answer as told: the control flow is the sink's own logic.
"""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import Row

from airflow_kafka_stream.core.batch_marker import BatchMarker
from airflow_kafka_stream.runtime import kafka_sink
from airflow_kafka_stream.runtime.kafka_sink import SinkTimeout, TransactionalKafkaSink


class Producer:
    """Records the transactional calls; ``stuck`` names the one that never returns until ``release`` is set."""

    def __init__(self, stuck: str | None = None) -> None:
        self.stuck, self.calls, self.release = stuck, [], threading.Event()

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.stuck:
            self.release.wait(30)

    def begin_transaction(self) -> None:
        self._call("begin")

    def produce(self, topic, **kwargs) -> None:
        self._call("produce")

    def poll(self, timeout) -> int:
        return 0

    def flush(self, timeout) -> int:
        self._call("flush")
        return 0

    def send_offsets_to_transaction(self, offsets, metadata, timeout) -> None:
        self._call("send_offsets")

    def commit_transaction(self, timeout) -> None:
        self._call("commit")

    def abort_transaction(self, timeout) -> None:
        self._call("abort")


class Consumer:
    def consumer_group_metadata(self) -> object:
        return object()


@pytest.fixture
def sink(monkeypatch):
    monkeypatch.setattr(kafka_sink, "BATCH_SECONDS", 0.5)
    monkeypatch.setattr(kafka_sink, "RETURN_GRACE_SECONDS", 0.2)
    made = TransactionalKafkaSink({"bootstrap.servers": "127.0.0.1:9"}, "out", job_name="job", group="group",
                                  generation=lambda: 1)
    made._consumer = Consumer()
    return made


def write(sink: TransactionalKafkaSink, producer: Producer) -> None:
    sink._producer = producer
    sink._transaction(iter([Row(key="k", value="v")]), BatchMarker(1, 7), None)


@pytest.mark.parametrize("stuck", ["send_offsets", "commit"])
def test_a_call_that_never_returns_fails_the_batch_at_its_bound_and_gives_the_producer_up(sink, stuck):
    producer = Producer(stuck=stuck)
    started = time.monotonic()
    with pytest.raises(SinkTimeout, match=r"gave up batch 7 .*did not return from"):
        write(sink, producer)
    assert time.monotonic() - started < 2.0, "the batch waited past its bound and the grace"
    assert sink._producer is None, "a producer stuck in a call is never called again"
    assert "abort" not in producer.calls, "an abort would conflict with the call still under way"
    assert sink.counts["committed"] == 0 and sink.marker is None
    producer.release.set()


def test_a_stuck_abort_gives_the_producer_up_and_the_batchs_own_error_is_raised(sink, monkeypatch):
    monkeypatch.setattr(kafka_sink, "ABORT_SECONDS", 0.2)
    producer = Producer(stuck="abort")
    producer.produce = lambda topic, **kwargs: (_ for _ in ()).throw(ValueError("a row the topic refuses"))
    with pytest.raises(ValueError, match="refuses"):
        write(sink, producer)
    assert sink._producer is None and sink.counts["aborted"] == 0
    producer.release.set()


def test_calls_that_answer_commit_the_batch_and_its_marker(sink):
    producer = Producer()
    write(sink, producer)
    assert producer.calls == ["begin", "produce", "flush", "send_offsets", "commit"]
    assert sink.marker == BatchMarker(1, 7) and sink.counts["committed"] == 1 and sink._producer is producer
