"""The Kafka timestamps of records at given offsets: what a job's lag in seconds is measured from.

A partition's time lag is how old the oldest record the job has not processed yet is: now minus the
timestamp of the record at the job's next offset. Kafka answers offsets, not times, so the record is
read: one consumer is assigned at each offset and takes the first record of each partition
(``consume``, a short timeout). That is one small fetch per partition, however far behind the job is.

Transactions leave markers (control records) that take an offset but are never returned as records,
so the record at an offset may not exist: the first record *at or after* the offset is taken. A
partition whose remaining offsets hold no record (only markers, or aborted records under
``read_committed``) reaches its end: its answer is None, nothing waits there. The consumer is told
about the end (``enable.partition.eof``), so that is known without waiting out the timeout.

The consumer is assigned only: it never joins or commits for a group (a group id of its own, never
used). :class:`RecordTimes` keeps one consumer for repeated looks (the driver's sampler);
:func:`record_timestamps` makes one for a single look (``ops``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import KafkaAccessError
from airflow_kafka_stream.kafka.clients import bootstrap_servers
from airflow_kafka_stream.kafka.clients import consumer as new_consumer

#: How long one look may wait for its records.
LOOK_TIMEOUT_SECONDS = 5.0
#: How far before a batch's end a look for the batch's newest record starts: the offsets just before an end
#: may be markers (a transactional producer's commit marker is usually the last offset of what it wrote).
TAIL_OFFSETS = 4

#: Settings that keep a look small: no group traffic, a small fetch, little read ahead.
_LOOK_SETTINGS = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",  # an offset below the low watermark (deleted records): the first one left
    "max.partition.fetch.bytes": 65536,
    "queued.max.messages.kbytes": 1024,
    "fetch.wait.max.ms": 100,
}


def _timestamp(msg: Any) -> int | None:
    kind, value = msg.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE or value is None or value < 0 else int(value)


class RecordTimes:
    """Reads record timestamps with one consumer, made at the first look and kept until :meth:`close`."""

    def __init__(self, config: Mapping[str, Any], timeout: float = LOOK_TIMEOUT_SECONDS) -> None:
        bootstrap_servers(config)
        self._config = dict(config)
        self._timeout = timeout
        self._consumer: Consumer | None = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            settings = {key: value for key, value in self._config.items() if not key.startswith("group.instance")}
            settings.update(_LOOK_SETTINGS)
            settings["group.id"] = f"airflow-kafka-stream-times-{uuid.uuid4().hex[:8]}"
            self._consumer = new_consumer(settings)
        return self._consumer

    def first_at(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """Per partition, the timestamp (ms) of the first record at or after its offset; None when the partition
        has no record from there (its end, or markers only). KafkaAccessError when a partition gets neither a
        record nor its end within the timeout."""
        found = self._read({tp: offset for tp, offset in offsets.items() if offset >= 0},
                           lambda tp, offset: True)
        return {tp: found[tp][1] for tp in offsets if tp in found}

    def newest_before(self, ranges: Mapping[TopicPartition, tuple[int, int]]) -> dict[TopicPartition, int | None]:
        """Per partition, the timestamp (ms) of the last record before ``end`` within ``[start, end)``: the newest
        record a batch over that range held (by offset). None when the range holds no record (markers only)."""
        wanted = {tp: (start, end) for tp, (start, end) in ranges.items() if end > start >= 0}
        starts = {tp: max(start, end - TAIL_OFFSETS) for tp, (start, end) in wanted.items()}
        found = self._read(starts, lambda tp, offset: offset < wanted[tp][1], until=lambda tp: wanted[tp][1] - 1)
        return {tp: found[tp][1] for tp in wanted if tp in found}

    def _read(self, starts: Mapping[TopicPartition, int], keep, until=None) -> dict[TopicPartition, tuple[int, Any]]:
        """Read each partition from its start: the first kept record (or, with ``until``, the last kept record up
        to that offset) as (offset, timestamp); (start, None) for a partition that ends without one."""
        if not starts:
            return {}
        consumer = self._client()
        done: dict[TopicPartition, tuple[int, Any]] = {}
        best: dict[TopicPartition, tuple[int, Any]] = {}
        try:
            consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in starts.items()])
            deadline = time.monotonic() + self._timeout
            while len(done) < len(starts):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = ", ".join(str(tp) for tp in sorted(starts) if tp not in done)
                    raise KafkaAccessError(f"no record nor the end of {missing} was read at "
                                           f"{bootstrap_servers(self._config)} within {self._timeout}s")
                for msg in consumer.consume(num_messages=100, timeout=min(remaining, 0.5)):
                    tp = TopicPartition(msg.topic(), msg.partition())
                    if tp not in starts or tp in done:
                        continue
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            done[tp] = best.get(tp, (starts[tp], None))
                            continue
                        raise KafkaAccessError(f"reading {tp} at {bootstrap_servers(self._config)} failed: {error}")
                    offset = msg.offset()
                    if keep(tp, offset):
                        best[tp] = (offset, _timestamp(msg))
                    if until is None or offset >= until(tp):
                        done[tp] = best.get(tp, (starts[tp], None))
        except KafkaException as exc:
            raise KafkaAccessError(f"reading record times at {bootstrap_servers(self._config)} failed: {exc}") from exc
        finally:
            try:
                consumer.unassign()
            except KafkaException:
                pass
        return done

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


def record_timestamps(config: Mapping[str, Any], offsets: Mapping[TopicPartition, int],
                      timeout: float = LOOK_TIMEOUT_SECONDS) -> dict[TopicPartition, int | None]:
    """The timestamp (ms) of the first record at or after each offset (None: no record from there), one look with a
    consumer of its own. KafkaAccessError when Kafka does not answer for a partition within ``timeout``."""
    times = RecordTimes(config, timeout)
    try:
        return times.first_at(offsets)
    finally:
        times.close()
