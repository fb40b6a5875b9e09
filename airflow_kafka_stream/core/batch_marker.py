"""The marker a transactional Kafka sink commits with each batch's output: which batch of which generation it was.

The sink commits a batch's records and the marker in one Kafka transaction: the marker is an offset the sink's
marker group commits for partition 0 of the output topic (``sendOffsetsToTransaction``), so it becomes visible
exactly when the batch's records do. A Kafka offset is one 64-bit number; the marker packs the checkpoint
generation and the batch id into it (generation in the high bits, batch id + 1 in the low 40 bits: a batch a
second for 34 000 years). A batch whose marker is already committed is not written again; a new generation
(a restore, a drop-state reset) starts its batch ids again and is written whatever the old generation's marker
says.
"""

from __future__ import annotations

from dataclasses import dataclass

BATCH_BITS = 40
_BATCH_LIMIT = 1 << BATCH_BITS


@dataclass(frozen=True, order=True)
class BatchMarker:
    """A committed batch: its checkpoint generation and batch id."""

    generation: int
    batch_id: int

    def offset(self) -> int:
        """The marker as the offset the marker group commits."""
        if not 0 <= self.batch_id < _BATCH_LIMIT - 1 or not 0 <= self.generation < (1 << 22):
            raise ValueError(f"batch marker out of range: generation {self.generation}, batch {self.batch_id}")
        return (self.generation << BATCH_BITS) | (self.batch_id + 1)

    @classmethod
    def from_offset(cls, offset: int | None) -> BatchMarker | None:
        """The marker a committed offset holds; None for no commit (librdkafka's negative logical offsets)."""
        if offset is None or offset <= 0:
            return None
        return cls(offset >> BATCH_BITS, (offset & (_BATCH_LIMIT - 1)) - 1)

    def covers(self, generation: int, batch_id: int) -> bool:
        """Whether batch ``batch_id`` of ``generation`` was already committed (this marker or an earlier batch of
        the same generation): then writing it again would duplicate its records."""
        return self.generation == generation and batch_id <= self.batch_id


def marker_group(group: str) -> str:
    """The consumer group holding a job's sink markers, beside the job's own group (never a reader's)."""
    return f"{group}.sink-markers"


def transactional_id(job_name: str, topic: str) -> str:
    """The sink's transactional id: one per job and output topic, the same for every driver and version of the
    job, so a new driver's first transaction fences (and aborts what is open of) any older one."""
    return f"airflow-kafka-stream.{job_name}.{topic}"
