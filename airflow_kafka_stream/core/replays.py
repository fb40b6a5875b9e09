"""Which input records a Kafka sink has written already, so that one that skips replays writes none twice.

With each batch's transaction the sink commits, beside its batch marker (``core.batch_marker``), how far it wrote
each input partition: the offset after the last input record whose output the transaction holds, as an offset of
its marker group for that input partition. Those offsets become visible exactly when the records do. A rewind (a
reset, a restore) moves the checkpoint back but not them, so the records it reads again sit below them: a sink
that skips replays (``skip_replays``) drops their rows, and the output holds each input record's output once.

Offsets only grow within a partition's life. A committed offset past the partition's end means the topic was
deleted and created again (its offsets start over): it is not trusted, since it would drop new records.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_kafka_stream.core.offsets import TopicPartition


def trusted_written_through(committed: Mapping[TopicPartition, int | None],
                            ends: Mapping[TopicPartition, int]) -> tuple[dict[TopicPartition, int], list[str]]:
    """The committed offsets the sink may skip below, and a warning for each one it may not (past the end)."""
    trusted: dict[TopicPartition, int] = {}
    warnings: list[str] = []
    for tp, offset in committed.items():
        if offset is None or offset < 0:
            continue
        end = ends.get(tp)
        if end is not None and offset > end:
            warnings.append(f"{tp.topic}:{tp.partition} was written through offset {offset}, past its end {end} (the "
                            "topic was created again?): its records are not skipped")
            continue
        trusted[tp] = offset
    return trusted, warnings


class ReplayFilter:
    """One batch's pass over its rows: which to write, and how far the batch writes each partition through.

    ``written_through`` is read as the batch goes (not copied): the sink fills in a topic's marks when its first row
    arrives, before that row is judged. It must not change otherwise until the batch's transaction commits.
    """

    def __init__(self, written_through: Mapping[TopicPartition, int], skip: bool) -> None:
        self.before = written_through
        self.skip = skip
        self.after: dict[TopicPartition, int] = {}
        self.skipped = 0

    def keep(self, tp: TopicPartition, offset: int) -> bool:
        """Whether the row of input record ``offset`` of ``tp`` is written; noted either way."""
        if offset + 1 > self.after.get(tp, -1):
            self.after[tp] = offset + 1
        if self.skip and offset < self.before.get(tp, -1):
            self.skipped += 1
            return False
        return True

    def advanced(self) -> dict[TopicPartition, int]:
        """The partitions this batch writes further than before: what its transaction commits."""
        return {tp: end for tp, end in self.after.items() if end > self.before.get(tp, -1)}
