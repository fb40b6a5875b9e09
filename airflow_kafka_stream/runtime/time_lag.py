"""The job's lag in seconds, measured on the driver on a thread of its own, at most once per interval.

Per partition: now minus the Kafka timestamp of the record at the job's committed offset (the next record
to read), 0 when the partition is caught up; and the delay of the last batch with records: its commit
time (when its progress event reached the runtime, right after Spark committed it) minus the timestamp of
the newest record it held, read at the end of the batch's offset range (``kafka.record_times``). The
progress events report offsets, not times, so both are looked up in Kafka: one watermark request, one
small fetch per lagging partition and, after a batch with records, one per partition it read.

The heartbeat pokes the sampler with the committed offsets; the sampler looks at most once per interval,
with an admin client and a consumer of its own, made at the first look and closed with it. A look that
fails is skipped (the status keeps the previous measurement, whose ``measured_at`` says how old it is)
and logged once until a look succeeds again: a missing measurement never holds back or fails the job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition
from airflow_kafka_stream.core.time_lag import (
    batch_delay_seconds,
    batch_ranges,
    lagging,
    partition_seconds,
    time_lag_document,
)
from airflow_kafka_stream.kafka import metadata
from airflow_kafka_stream.kafka.clients import lookup_consumer
from airflow_kafka_stream.kafka.record_times import RecordTimes
from airflow_kafka_stream.runtime.paced_thread import PacedThread

log = logging.getLogger(__name__)

#: How long one watermark request or record fetch may take.
LOOK_TIMEOUT_SECONDS = 5.0
#: Measurements kept in the status for the job page's seconds plot ([epoch, max seconds]; a few KB).
TIME_LAG_SAMPLES = 120


class Looks:
    """The Kafka reads a measurement needs, each with a client made at first use and kept until :meth:`close`."""

    def __init__(self, client_config: Mapping[str, Any], timeout: float = LOOK_TIMEOUT_SECONDS) -> None:
        self._config = dict(client_config)
        self._timeout = timeout
        self._lookup = None
        self._times = None

    def highs(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        if self._lookup is None:
            self._lookup = lookup_consumer(self._config)
        found = metadata.watermarks(self._config, partitions, self._timeout, client=self._lookup)
        return {tp: high for tp, (_low, high) in found.items()}

    def _record_times(self):
        if self._times is None:
            self._times = RecordTimes(self._config, self._timeout)
        return self._times

    def first_at(self, offsets: PartitionOffsets) -> dict[TopicPartition, int | None]:
        return self._record_times().first_at(offsets) if offsets else {}

    def newest_before(self, ranges: Mapping[TopicPartition, tuple[int, int]]) -> dict[TopicPartition, int | None]:
        return self._record_times().newest_before(ranges) if ranges else {}

    def close(self) -> None:
        times, lookup, self._times, self._lookup = self._times, self._lookup, None, None
        if times is not None:
            times.close()
        if lookup is not None:
            lookup.close()


class TimeLagSampler:
    """Measures the time lag after :meth:`poke`, on its own thread, at most once per ``interval``."""

    def __init__(self, looks: Looks, interval: float, on_measured: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.time) -> None:
        self._looks = looks
        self._on_measured = on_measured
        self._clock = clock
        self._lock = threading.Lock()
        self._pacer = PacedThread("time-lag-sampler", self.measure, interval)
        self._offsets: PartitionOffsets | None = None
        #: The newest batch with records not measured yet: its offset ranges and commit time (ms).
        self._batch: tuple[dict[TopicPartition, tuple[int, int]], int] | None = None
        self._delay: float | None = None
        self._document: dict[str, Any] | None = None
        self._samples: deque[list] = deque(maxlen=TIME_LAG_SAMPLES)
        self._highs: dict[TopicPartition, int] = {}
        self._failing = False

    @classmethod
    def for_kafka(cls, client_config: Mapping[str, Any], interval: float,
                  on_measured: Callable[[], None] = lambda: None) -> TimeLagSampler:
        return cls(Looks(client_config), interval, on_measured)

    # -- what the runtime tells it -------------------------------------------------------------
    def poke(self, offsets: PartitionOffsets | None) -> None:
        """The job's committed offsets now (the heartbeat calls this): measured when the interval has passed."""
        if not offsets or self._pacer.closing:
            return
        with self._lock:
            self._offsets = dict(offsets)
        self._pacer.kick()

    def batch_committed(self, starts: PartitionOffsets | None, ends: PartitionOffsets, records: int) -> None:
        """A batch committed now; with records, its delay is measured at the next look (a newer one replaces it)."""
        if records <= 0:
            return
        ranges = batch_ranges(starts, ends)
        if ranges:
            with self._lock:
                self._batch = (ranges, int(self._clock() * 1000))

    # -- what the status shows -----------------------------------------------------------------
    def document(self) -> dict[str, Any] | None:
        """The status's ``time_lag`` (None before the first measurement)."""
        with self._lock:
            return None if self._document is None else dict(self._document)

    def samples(self) -> list[list]:
        with self._lock:
            return list(self._samples)

    def highs(self) -> dict[TopicPartition, int]:
        """The high watermarks its last look read (empty before one): the metrics' lag in records uses them
        rather than asking Kafka the same question again."""
        with self._lock:
            return dict(self._highs)

    # -- measuring -----------------------------------------------------------------------------
    def measure(self) -> bool:
        """One measurement of the offsets last poked; False when there were none or a look failed (skipped)."""
        with self._lock:
            offsets, batch, self._batch = self._offsets, self._batch, None
        if not offsets:
            return False
        self._pacer.began()
        try:
            highs = self._looks.highs(sorted(offsets))
            with self._lock:
                self._highs = dict(highs)
            stamps = self._looks.first_at(lagging(offsets, highs))
            now = self._clock()
            seconds = partition_seconds(int(now * 1000), offsets, highs, stamps)
            if seconds is None:
                raise LookupError("a lagging partition's record was not read")
            if batch is not None:
                ranges, committed_at = batch
                delay = batch_delay_seconds(committed_at, self._looks.newest_before(ranges))
                self._delay = self._delay if delay is None else delay
        except Exception as exc:  # noqa: BLE001 - a missing measurement must never trouble the job
            if not self._failing:
                log.warning("no time lag measurement (skipped until Kafka answers; logged once): %s", exc)
            self._failing = True
            return False
        if self._failing:
            log.info("time lag measured again")
        self._failing = False
        document = time_lag_document(datetime.fromtimestamp(now, UTC), seconds, self._delay)
        with self._lock:
            self._document = document
            self._samples.append([round(now, 1), document["max_seconds"]])
        self._on_measured()
        return True

    @property
    def _thread(self):
        """The sampler's thread (None before the first poke)."""
        return self._pacer.thread

    def close(self) -> None:
        if self._pacer.close(2 * LOOK_TIMEOUT_SECONDS + 1):
            self._looks.close()
