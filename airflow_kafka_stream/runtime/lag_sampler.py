"""The job's lag from Kafka's watermarks, for batches whose progress does not report it.

The runtime's lag plot normally comes from each batch's progress: the source reports the high
watermarks it planned against (``latestOffset``). PySpark reports none for a driver-side reader
(``readMode=driver``), nor do some JVM sources. For such batches the runtime hands the batch's
end offsets to a :class:`LagSampler`, which asks Kafka for the partitions' high watermarks on its
own thread, at most once per interval, and reports the records waiting after that batch. Only the
newest batch matters, so a new one replaces a pending one; a failed request is logged and skipped,
since a missing sample must never hold back or fail the job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, records_behind
from airflow_kafka_stream.kafka import metadata
from airflow_kafka_stream.kafka.clients import lookup_consumer
from airflow_kafka_stream.runtime.paced_thread import PacedThread

log = logging.getLogger(__name__)

#: How long one watermark request may take.
REQUEST_TIMEOUT_SECONDS = 5.0

Watermarks = Callable[[list[TopicPartition]], Mapping[TopicPartition, tuple[int, int]]]


def records_waiting(offsets: PartitionOffsets, bounds: Mapping[TopicPartition, tuple[int, int]]) -> int:
    """Records after ``offsets`` (next offsets to read) up to the high watermarks, summed over partitions.

    A partition without a watermark (gone) counts nothing, and neither does one read past its
    watermark (a truncated or recreated topic, which the source reports on its own).
    """
    return sum(records_behind(bounds[tp][1], offset) for tp, offset in offsets.items() if tp in bounds)


class LagSampler:
    """Measures the lag after the newest submitted batch, on its own thread, at most once per ``interval``."""

    def __init__(self, watermarks: Watermarks, on_sample: Callable[[int, int], None], interval: float) -> None:
        self._watermarks = watermarks
        self._on_sample = on_sample
        self._lock = threading.Lock()
        self._pending: tuple[int, PartitionOffsets] | None = None
        self._pacer = PacedThread("lag-sampler", self.sample_pending, interval)

    @classmethod
    def for_kafka(cls, client_config: Mapping[str, Any], on_sample: Callable[[int, int], None],
                  interval: float) -> LagSampler:
        """A sampler with a lookup client of its own, made at its first sample and gone with it: a client
        shared with the rest of the process outlives the job's topics, and librdkafka 2.16 can crash a
        client that asked about a topic which was deleted and created again (seen in the suite: a
        segfault in ListOffsets from this thread)."""
        clients: list = []

        def ask(partitions: list[TopicPartition]) -> Mapping[TopicPartition, tuple[int, int]]:
            if not clients:
                clients.append(lookup_consumer(client_config))
            return metadata.watermarks(client_config, partitions, REQUEST_TIMEOUT_SECONDS, client=clients[0])

        return cls(ask, on_sample, interval)

    def submit(self, batch_id: int, offsets: PartitionOffsets) -> None:
        """Sample the lag after this batch (replacing a batch not sampled yet); starts the thread once."""
        if self._pacer.closing:
            return
        with self._lock:
            self._pending = (batch_id, dict(offsets))
        self._pacer.kick()

    def sample_pending(self) -> bool:
        """Take one sample of the pending batch now; False when there was none or Kafka did not answer."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return False
        batch_id, offsets = pending
        self._pacer.began()
        try:
            bounds = self._watermarks(sorted(offsets))
        except Exception as exc:  # noqa: BLE001 - a missing sample must never trouble the job
            log.info("no lag sample after batch %d: the watermarks could not be read (%s)", batch_id, exc)
            return False
        self._on_sample(batch_id, records_waiting(offsets, bounds))
        return True

    def close(self) -> None:
        self._pacer.close(REQUEST_TIMEOUT_SECONDS + 1)
