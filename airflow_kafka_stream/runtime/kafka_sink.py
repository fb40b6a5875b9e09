"""Exactly once from Kafka to Kafka: a ``foreachBatch`` sink that commits each batch in one Kafka transaction.

The driver writes each batch's rows (``key``, ``value``, optional ``headers``) to the output topic with one
transactional producer, and commits them together with the batch's marker (``core.batch_marker``: generation
and batch id, an offset of the sink's marker group sent with ``sendOffsetsToTransaction``). So:

* a batch Spark re-runs after a crash (its ``commits/N`` not written) finds its marker committed when its records
  were, and writes nothing; when they were not (the driver died inside the transaction), the new driver's first
  ``initTransactions`` aborted that transaction, and the batch is written once;
* a ``read_committed`` consumer sees each batch's records once, all of them or none;
* with ``skip_replays`` (rows carrying their input's ``topic``, ``partition`` and ``offset``), records a rewind
  reads again are not written again either: each transaction also commits how far the sink wrote each input
  partition (``core.replays``);
* the transactional id is the job's (``core.batch_marker.transactional_id``): a new driver, a restarted one or
  a new version's, fences the older one, whose next write fails instead of duplicating.

Why the driver and one producer, not a producer per Spark task: Kafka has no "prepared" transaction a driver
could commit for its tasks (KIP-939 is not complete), so a task-side design needs a transaction, a marker and an
``initTransactions`` (0.6-1.1 s measured on the test broker) per task and batch, and deterministic task-to-writer
assignment across replays (SPARK-28908, FLINK's pooled ids). On the driver, ``initTransactions`` runs once per
driver and a batch costs one commit (about 25 ms measured); the rows stream to it partition by partition
(``toLocalIterator``), so its memory holds one partition. The limit is one producer's throughput (docs/sink.md
has the figures).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from airflow_kafka_stream.core.batch_marker import BatchMarker, marker_group, transactional_id
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.replays import ReplayFilter, trusted_written_through
from airflow_kafka_stream.errors import InvalidInputError, StreamError
from airflow_kafka_stream.kafka.transactions import answered, init_transactions

log = logging.getLogger(__name__)

#: How long one transaction may stay open before the broker aborts it; within the broker's
#: ``transaction.max.timeout.ms`` (15 minutes by default), refused above it when the producer starts.
TRANSACTION_TIMEOUT_MS = 60_000
#: How long the driver waits for ``initTransactions`` and the marker's read when its producer starts.
REQUEST_TIMEOUT_SECONDS = 60.0
#: The most a batch's transaction may take, from its begin to its commit: the broker aborts it at
#: :data:`TRANSACTION_TIMEOUT_MS` anyway, so past that the driver stops waiting (librdkafka retries each request up
#: to its own timeout: delivery, send offsets and commit would add up to minutes against a dead coordinator) and
#: fails the batch with the reason; the query fails, and the driver that starts next writes the batch once.
BATCH_SECONDS = TRANSACTION_TIMEOUT_MS / 1000
#: How long the driver tries to abort a failed batch's transaction; if it cannot, the next driver's start does.
ABORT_SECONDS = 10.0
#: How much longer than its timeout a transactional call may take to return before the driver stops waiting for it:
#: librdkafka's ``send_offsets_to_transaction`` can block past its timeout while the group coordinator it cached
#: is down (librdkafka issues 5456 and 5511; seen here when a node coordinating both the transaction and the marker
#: group was killed: the batch hung for minutes, its driver alive).
RETURN_GRACE_SECONDS = 5.0
#: A test hook: crash tests set it to a point of a batch (``before-write``, ``writing``, ``committed``,
#: ``spark-committed``) and the driver waits there once (the first batch after the first that reaches it), after
#: writing the batch id to the file :data:`PAUSE_FILE_ENV` names, for :data:`PAUSE_SECONDS_ENV` (default an hour:
#: until it is killed).
PAUSE_ENV = "AIRFLOW_KAFKA_STREAM_TEST_SINK_PAUSE"
PAUSE_FILE_ENV = "AIRFLOW_KAFKA_STREAM_TEST_SINK_PAUSE_FILE"
PAUSE_SECONDS_ENV = "AIRFLOW_KAFKA_STREAM_TEST_SINK_PAUSE_SECONDS"


class SinkFenced(StreamError):
    """Another driver of the job took the sink's transactional id: this one must not write again."""


class SinkTimeout(StreamError):
    """A batch's transaction did not complete within :data:`BATCH_SECONDS`: the batch fails (and is aborted)."""


class TransactionalKafkaSink:
    """Writes batches to ``topic`` exactly once (see the module docstring); ``write`` is the foreachBatch function.

    :param client_config: librdkafka settings of the job (bootstrap servers, security, secrets).
    :param generation: the checkpoint generation of the batch being written (the runtime's).
    :param skip_replays: drop the rows of input records the sink wrote before (a rewind reads them again); the
        batch must then carry its input's ``topic``, ``partition`` and ``offset`` columns.
    """

    #: The input's coordinates in a batch: written through per partition, never to the output.
    COORDINATES = ("topic", "partition", "offset")

    def __init__(self, client_config: Mapping[str, Any], topic: str, *, job_name: str, group: str,
                 generation: Callable[[], int | None], skip_replays: bool = False) -> None:
        if not topic:
            raise InvalidInputError("the Kafka sink needs its output topic: give output_topic", setting="output_topic")
        self.topic, self.job_name, self.group = topic, job_name, group
        self.client_config = dict(client_config)
        self.transactional_id = transactional_id(job_name, topic)
        self.marker_group = marker_group(group)
        self._generation = generation
        self._producer = self._consumer = None
        self.marker: BatchMarker | None = None
        self.counts = {"committed": 0, "aborted": 0, "fenced": 0, "skipped": 0}
        self.skip_replays = skip_replays
        self.written_through: dict[TopicPartition, int] = {}
        self._read_topics: set[str] = set()
        self.replays_skipped = 0
        self.last_transaction_seconds: float | None = None
        self.records = 0
        self.fenced = False  # once fenced, never again: starting a producer would fence the driver that took over

    # -- the foreachBatch function -------------------------------------------------------------------
    def write(self, df, batch_id: int) -> None:
        """Write batch ``batch_id`` (a DataFrame with ``value`` and optionally ``key`` and ``headers``) once."""
        generation = int(self._generation() or 0)
        self.open()
        if self.marker is not None and self.marker.covers(generation, batch_id):
            self.counts["skipped"] += 1
            log.info("sink %s: batch %d of generation %d was committed to Kafka before; not written again",
                     self.topic, batch_id, generation)
            # Still computed, its rows dropped: a stateful query's batch must commit every state store partition
            # (Spark fails the batch with STATE_STORE_COMMIT_VALIDATION_FAILED otherwise), and the next batch
            # builds on this one's state.
            df.write.format("noop").mode("overwrite").save()
            return
        columns = [name for name in ("key", "value", "headers") if name in df.columns]
        if "value" not in columns:
            raise InvalidInputError(f"the Kafka sink writes a column 'value' (and optionally 'key', 'headers'); the "
                                    f"batch has {df.columns}", setting="output_topic")
        located = all(name in df.columns for name in self.COORDINATES)
        if self.skip_replays and not located:
            raise InvalidInputError(f"skip_replays needs each row's input record: columns topic, partition and offset "
                                    f"(as the Kafka source gives them); the batch has {df.columns}",
                                    setting="skip_replays")
        pause("before-write", batch_id)
        rows = df.select(*columns, *(self.COORDINATES if located else ())).toLocalIterator(prefetchPartitions=True)
        self._transaction(rows, BatchMarker(generation, batch_id),
                          ReplayFilter(self.written_through, self.skip_replays) if located else None)
        pause("committed", batch_id)

    def _transaction(self, rows: Iterable[Any], marker: BatchMarker, replays: ReplayFilter | None) -> None:
        producer, started, failed = self._producer, time.monotonic(), []
        left = _Budget(started + BATCH_SECONDS, self.topic, marker.batch_id)
        producer.begin_transaction()
        try:
            written = self._produce_all(producer, rows, failed, marker.batch_id, left, replays)
            undelivered = producer.flush(left())
            if failed:
                raise StreamError(f"the Kafka sink could not write to {self.topic}: {failed[0]}")
            if undelivered:
                raise left.exhausted(f"{undelivered} of its {written} records were not delivered")
            through = [KafkaPartition(tp.topic, tp.partition, end) for tp, end in
                       (replays.advanced() if replays else {}).items()]
            offsets = [KafkaPartition(self.topic, 0, marker.offset()), *through]
            metadata = self._consumer.consumer_group_metadata()
            self._returned(lambda: producer.send_offsets_to_transaction(offsets, metadata, left()), left,
                           "sending the batch's marker to its transaction")
            self._returned(lambda: producer.commit_transaction(left()), left, "committing the transaction")
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            self._failed(error)
            if getattr(error, "code", lambda: None)() == KafkaError._TIMED_OUT:
                raise left.exhausted(f"Kafka did not answer in the time left ({error})") from exc
            raise
        except BaseException:
            self._abort()
            raise
        self.marker, self.records = marker, self.records + written
        self.counts["committed"] += 1
        if replays is not None:
            self.written_through.update(replays.advanced())
            self.replays_skipped += replays.skipped
            if replays.skipped:
                log.info("sink %s: batch %d skipped %d record(s) written before (skip_replays)", self.topic,
                         marker.batch_id, replays.skipped)
        self.last_transaction_seconds = time.monotonic() - started

    def _produce_all(self, producer, rows: Iterable[Any], failed: list, batch_id: int, left: _Budget,
                     replays: ReplayFilter | None) -> int:
        def delivered(error, _message) -> None:
            if error is not None and not failed:
                failed.append(error)

        written = 0
        for row in rows:
            fields = row.asDict()
            if replays is not None:
                tp = TopicPartition(str(fields["topic"]), int(fields["partition"]))
                self._read_written_through(tp.topic)
                if not replays.keep(tp, int(fields["offset"])):
                    continue
            kwargs = {"value": _bytes(fields["value"]), "key": _bytes(fields.get("key")), "on_delivery": delivered}
            if fields.get("headers"):
                kwargs["headers"] = [(str(h["key"]), _bytes(h["value"])) for h in fields["headers"]]
            while True:
                try:
                    producer.produce(self.topic, **kwargs)
                    break
                except BufferError:  # the producer's queue is full: let it send, then go on
                    producer.poll(min(0.05, left()))
            written += 1
            if written == 1:
                pause("writing", batch_id)
        return written

    def _failed(self, error: Any) -> None:
        """A Kafka error inside a transaction: fenced (another driver took the sink) or aborted."""
        code = getattr(error, "code", lambda: None)()
        if code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
            self.counts["fenced"] += 1
            self.fenced = True
            raise SinkFenced(f"the Kafka sink of job {self.job_name} was fenced: another driver of the job writes "
                             f"to {self.topic} with transactional id {self.transactional_id}; this one stops") from None
        self._abort()

    def _returned(self, request: Callable[[], Any], left: _Budget, what: str) -> Any:
        """``request()``'s answer, waited for no longer than the batch's time left (and a grace): a call librdkafka
        does not return from in that time goes on in its own thread, the producer is given up (never called
        again: the next one this driver or the next driver starts fences it), and the batch fails naming it."""
        outcome = _call_within(request, left() + RETURN_GRACE_SECONDS)
        if not outcome.done():
            log.warning("sink %s: Kafka's client did not return from %s within the batch's timeout; its producer "
                        "is given up", self.topic, what)
            self._producer = None
            raise left.exhausted(f"Kafka's client did not return from {what}")
        return outcome.result()

    def _abort(self) -> None:
        producer = self._producer
        if producer is None:  # given up while stuck in a call: the next producer's start aborts the transaction
            return
        try:
            aborted = _call_within(lambda: producer.abort_transaction(ABORT_SECONDS),
                                   ABORT_SECONDS + RETURN_GRACE_SECONDS)
            if not aborted.done():
                raise StreamError(f"Kafka's client did not return from the abort in {ABORT_SECONDS:.0f} s")
            aborted.result()
            self.counts["aborted"] += 1
        except Exception as exc:  # noqa: BLE001 - the batch's own error is what the query reports
            log.warning("sink %s: aborting the transaction failed (%s); the next driver's start aborts it",
                        self.topic, exc)
            self._producer = None  # in no known state: a later batch of this driver starts a new one, which aborts

    def _read_written_through(self, topic: str) -> None:
        """How far committed transactions wrote ``topic``'s partitions (once per topic and driver)."""
        if topic in self._read_topics:
            return
        found = self._consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_SECONDS).topics[topic].partitions
        partitions = [KafkaPartition(topic, p) for p in sorted(found)]
        committed = answered(lambda: self._consumer.committed(partitions, REQUEST_TIMEOUT_SECONDS),
                             REQUEST_TIMEOUT_SECONDS)
        ends = {TopicPartition(topic, p.partition): self._consumer.get_watermark_offsets(
            p, REQUEST_TIMEOUT_SECONDS)[1] for p in partitions}
        trusted, warnings = trusted_written_through(
            {TopicPartition(topic, c.partition): c.offset for c in committed}, ends)
        for warning in warnings:
            log.warning("sink %s: %s", self.topic, warning)
        self.written_through.update(trusted)
        self._read_topics.add(topic)

    # -- the producer's life ---------------------------------------------------------------------------
    def open(self) -> None:
        """Start the producer once: ``initTransactions`` fences older drivers and aborts what they left open;
        then read the last committed batch marker."""
        if self._producer is not None and not self.fenced:
            return
        if self.fenced:
            raise SinkFenced(f"the Kafka sink of job {self.job_name} was fenced by another driver; this one stops")

        settings = {key: value for key, value in self.client_config.items() if not key.startswith("group.")}
        producer = Producer({**settings, "transactional.id": self.transactional_id,
                             "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "enable.idempotence": True,
                             "partitioner": "murmur2_random", "linger.ms": 5})
        init_transactions(producer, self.transactional_id, self.marker_group, settings.get("bootstrap.servers"),
                          REQUEST_TIMEOUT_SECONDS)
        consumer = Consumer({**settings, "group.id": self.marker_group, "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        committed = answered(lambda: consumer.committed([KafkaPartition(self.topic, 0)], REQUEST_TIMEOUT_SECONDS),
                             REQUEST_TIMEOUT_SECONDS)
        self._producer, self._consumer = producer, consumer
        self.marker = BatchMarker.from_offset(committed[0].offset if committed else None)
        log.info("sink %s: transactional id %s, last committed batch %s", self.topic, self.transactional_id,
                 self.marker)

    def close(self, timeout: float) -> bool:
        """End the producer (nothing is open between batches: a stop after a batch leaves no transaction)."""
        producer, consumer, self._producer, self._consumer = self._producer, self._consumer, None, None
        if consumer is not None:
            consumer.close()
        return producer is None or producer.flush(timeout) == 0

    def document(self) -> dict[str, Any]:
        """The status's ``kafka_sink`` field: the topic, the last committed batch and the transactions' counts."""
        return {"topic": self.topic, "transactional_id": self.transactional_id, "marker_group": self.marker_group,
                "last_committed": (None if self.marker is None else
                                   {"generation": self.marker.generation, "batch_id": self.marker.batch_id}),
                "transactions": dict(self.counts), "records_this_run": self.records,
                "skip_replays": self.skip_replays, "replays_skipped_this_run": self.replays_skipped,
                "last_transaction_seconds": self.last_transaction_seconds}


def attach_kafka_sink(runtime, topic: str, **options: Any) -> TransactionalKafkaSink:
    """A sink for ``runtime``'s job (its Kafka settings, name, group and generation), part of its run: its status
    field ``kafka_sink``, closed when the run ends."""
    config = runtime.config
    if options.pop("skip_replays", config.skip_replays) != config.skip_replays:
        raise InvalidInputError("skip_replays is the job's setting, so that job.json records it and resets and "
                                "restores say what a rewind writes: set StreamConfig.skip_replays", setting="skip_replays")
    sink = TransactionalKafkaSink(config.client_config(), topic, job_name=config.job_name, group=config.group_id,
                                  generation=lambda: runtime.generation, skip_replays=config.skip_replays, **options)
    runtime.run_state.add_part("kafka_sink", sink.document, sink.close)
    return sink


class _Budget:
    """What is left of a batch's transaction (:data:`BATCH_SECONDS`); called, the seconds left for the next
    request, or the batch fails with :class:`SinkTimeout` naming what it waited for."""

    def __init__(self, deadline: float, topic: str, batch_id: int) -> None:
        self.deadline, self.topic, self.batch_id = deadline, topic, batch_id

    def __call__(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.exhausted("its requests did not complete")
        return left

    def exhausted(self, what: str) -> SinkTimeout:
        return SinkTimeout(f"the Kafka sink gave up batch {self.batch_id} to {self.topic} after {BATCH_SECONDS:.0f} s "
                           f"(the transaction's timeout): {what}. Is a broker of the topic or the transaction "
                           "coordinator down? The batch's transaction is aborted; the next start writes it once. "
                           "If batches are too big to write in that time, lower max_offsets_per_trigger")


def _call_within(request: Callable[[], Any], seconds: float) -> Future:
    """``request()`` run in a daemon thread, waited for up to ``seconds``: its future, not done when the call did
    not return in time (it is then left to return, or not, alone)."""
    future: Future = Future()

    def call() -> None:
        try:
            future.set_result(request())
        except BaseException as exc:  # noqa: BLE001 - the waiting thread raises it from the future
            future.set_exception(exc)

    threading.Thread(target=call, name="kafka-sink-call", daemon=True).start()
    wait_for([future], timeout=seconds)
    return future


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    return str(value).encode()


def pause(point: str, batch_id: int) -> None:
    """The crash tests' hook (:data:`PAUSE_ENV`): at ``point`` of a batch after the first, say so and wait to be
    killed. Unset (always, outside those tests) it does nothing."""
    if os.environ.get(PAUSE_ENV) != point or batch_id < 1 or os.path.exists(os.environ[PAUSE_FILE_ENV]):
        return
    with open(os.environ[PAUSE_FILE_ENV], "w") as said:
        said.write(str(batch_id))
    seconds = float(os.environ.get(PAUSE_SECONDS_ENV) or 3600)
    log.warning("test hook: the sink waits %.0f s at %s of batch %d", seconds, point, batch_id)
    time.sleep(seconds)
