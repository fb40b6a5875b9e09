"""The scope of an offset reset: all the job's topics, or ``topic`` / ``topic:0,1`` specs.

A scope is parsed from text (the CLI's repeated topic option, an operator's
``topics`` list) before anything is looked up, and resolved against the job's
topics and their partition counts when the plan is made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import OffsetPlanError


@dataclass(frozen=True)
class Scope:
    """Which partitions a reset touches: all the job's topics, or ``topic`` / ``topic:0,1`` specs."""

    topics: Mapping[str, frozenset[int] | None] = field(default_factory=dict)

    @property
    def is_all(self) -> bool:
        return not self.topics

    def whole_topic(self, topic: str) -> bool:
        """Whether every partition of ``topic`` is in scope (the scope is all topics, or names it bare)."""
        return self.is_all or (topic in self.topics and self.topics[topic] is None)

    def describe(self) -> str:
        if self.is_all:
            return "all topics"
        return " ".join(t if p is None else f"{t}:{','.join(map(str, sorted(p)))}" for t, p in self.topics.items())

    def resolve(self, partitions_by_topic: Mapping[str, int]) -> set[TopicPartition]:
        """The partitions selected, checked against the job's topics and their partition counts."""
        if self.is_all:
            return {TopicPartition(t, p) for t, count in partitions_by_topic.items() for p in range(count)}
        selected: set[TopicPartition] = set()
        for topic, partitions in self.topics.items():
            if topic not in partitions_by_topic:
                raise OffsetPlanError(
                    f"scope names topic {topic!r}, which is not one of the job's topics "
                    f"({', '.join(sorted(partitions_by_topic)) or 'none'}); fix the topic name", setting="scope"
                )
            count = partitions_by_topic[topic]
            unknown = sorted(p for p in partitions or () if p >= count)
            if unknown:
                raise OffsetPlanError(
                    f"scope names partition(s) {', '.join(map(str, unknown))} of topic {topic!r}, which has "
                    f"{count} partitions (0..{count - 1}); fix the partition numbers", setting="scope"
                )
            selected.update(TopicPartition(topic, p) for p in (range(count) if partitions is None else partitions))
        return selected


def parse_scope(specs: str | Sequence[str] | None) -> Scope:
    """Parse scope specs: none for all the job's topics, else each ``topic`` or ``topic:0,1``."""
    if specs is None:
        return Scope()
    items = [specs] if isinstance(specs, str) else list(specs)
    topics: dict[str, frozenset[int] | None] = {}
    for raw in items:
        spec = raw.strip()
        if not spec:
            if len(items) == 1:
                return Scope()
            raise OffsetPlanError("empty topic in the scope; give 'topic' or 'topic:0,1'", setting="scope")
        topic, sep, parts = spec.partition(":")
        topic = topic.strip()
        if not topic:
            raise OffsetPlanError(f"scope {spec!r} has no topic name; write 'topic' or 'topic:0,1'", setting="scope")
        if not sep:
            topics[topic] = None
            continue
        numbers = [p.strip() for p in parts.split(",")]
        if not parts.strip() or any(not re.fullmatch(r"[0-9]+", p) for p in numbers):
            raise OffsetPlanError(
                f"scope {spec!r}: partitions must be a comma-separated list of numbers >= 0, like '{topic}:0,1'",
                setting="scope"
            )
        if topic in topics and topics[topic] is None:
            continue  # the whole topic is already selected
        topics[topic] = frozenset(int(p) for p in numbers) | (topics.get(topic) or frozenset())
    return Scope(topics)
