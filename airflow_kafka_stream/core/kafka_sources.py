"""A checkpoint's Kafka sources: which offsets line holds which partitions, and how a reset splits back.

A query that unions several Kafka readers writes one offsets line per reader
into ``offsets/N``, in the order Spark numbered the sources. Rules:

1. A Kafka source is a source line shaped like Kafka offsets JSON; other lines
   (``-``, a rate source's offset) are not Kafka sources and every append
   carries them unchanged.
2. The consumer group holds one offset per partition, so the job's position is
   the union of the sources' partitions. A partition held by two sources has
   two positions and no single group offset: operations that compare with or
   move the group refuse that shape instead of guessing.
3. A target goes back to the source whose line holds its partition; a
   partition no line holds (a new partition) goes to the one source that
   holds its topic; with a single Kafka source everything goes to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, parse_offsets_json
from airflow_kafka_stream.errors import CheckpointFormatError, InvalidInputError


def kafka_source_lines(lines: Sequence[str | None]) -> dict[int, PartitionOffsets]:
    """Every Kafka-shaped source line by its index; other lines are left out (rule 1)."""
    found: dict[int, PartitionOffsets] = {}
    for index, line in enumerate(lines):
        if line is None:
            continue
        try:
            found[index] = parse_offsets_json(line)
        except CheckpointFormatError:
            continue
    return found


@dataclass(frozen=True)
class KafkaSources:
    """The Kafka source lines of one batch (``offsets/N`` or a savepoint), by source index."""

    by_index: Mapping[int, PartitionOffsets]
    where: str = "the checkpoint"

    @classmethod
    def of_lines(cls, lines: Sequence[str | None], where: str = "the checkpoint") -> KafkaSources:
        return cls(kafka_source_lines(lines), where)

    @property
    def indexes(self) -> list[int]:
        return sorted(self.by_index)

    def require_any(self) -> KafkaSources:
        """Self, or an error saying that there is no Kafka source to work on."""
        if not self.by_index:
            raise InvalidInputError(
                f"{self.where} has no Kafka source: none of its source offset lines holds Kafka offsets "
                '(like {"topic":{"0":23}}), so there are no Kafka offsets to verify or reset; point the '
                "operation at the checkpoint of a query that reads Kafka", setting="checkpoint"
            )
        return self

    def shared_partitions(self) -> dict[TopicPartition, list[int]]:
        """Partitions held by more than one source, with the sources holding them (rule 2)."""
        holders: dict[TopicPartition, list[int]] = {}
        for index in self.indexes:
            for tp in self.by_index[index]:
                holders.setdefault(tp, []).append(index)
        return {tp: indexes for tp, indexes in sorted(holders.items()) if len(indexes) > 1}

    def require_one_position_per_partition(self, operation: str) -> KafkaSources:
        """Self, or an error naming the partitions that two sources read (no single group offset)."""
        self.require_any()
        shared = self.shared_partitions()
        if shared:
            listed = ", ".join(f"{tp} (sources {', '.join(map(str, idx))})" for tp, idx in list(shared.items())[:5])
            raise InvalidInputError(
                f"{self.where}: {len(shared)} partition(s) are read by more than one Kafka source: {listed}. "
                f"Each has several positions but the consumer group holds one offset per partition, so "
                f"{operation} cannot tell which one is meant and refuses; read each topic in one source only"
            )
        return self

    def union(self) -> PartitionOffsets:
        """Every source's partitions in one mapping (rule 2; callers check for shared partitions first)."""
        merged: PartitionOffsets = {}
        for index in self.indexes:
            merged.update(self.by_index[index])
        return merged

    def source_of(self, tp: TopicPartition) -> int:
        """The source index a target for ``tp`` belongs to (rule 3)."""
        holders = [index for index in self.indexes if tp in self.by_index[index]]
        if len(holders) == 1:
            return holders[0]
        if len(self.by_index) == 1:
            return self.indexes[0]
        if holders:
            raise InvalidInputError(f"{self.where}: {tp} is read by sources {holders}; cannot choose one of them")
        by_topic = [index for index in self.indexes if any(p.topic == tp.topic for p in self.by_index[index])]
        if len(by_topic) == 1:
            return by_topic[0]
        reason = (f"sources {by_topic} all read topic {tp.topic!r}" if by_topic
                  else f"none of its {len(self.by_index)} Kafka sources reads topic {tp.topic!r}")
        raise InvalidInputError(
            f"{self.where}: a target for {tp} cannot be placed in one source line, because {reason}; "
            f"narrow the reset's scope to the topics the checkpoint reads", setting="scope"
        )

    def split(self, targets: Mapping[TopicPartition, int]) -> dict[int, PartitionOffsets]:
        """Targets per source index; every Kafka source gets a line, even when no target falls in it."""
        lines: dict[int, PartitionOffsets] = {index: {} for index in self.indexes}
        for tp in sorted(targets):
            lines[self.source_of(tp)][tp] = targets[tp]
        return lines
