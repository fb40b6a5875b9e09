"""Reset plans as CSV, in the format of ``kafka-consumer-groups.sh --reset-offsets --export``.

Kafka's tool exports one ``topic,partition,offset`` line per partition, no header,
``\\n`` line ends (the single-group form of ``ConsumerGroupCommand.exportOffsetsToCsv``),
and reads the same lines back with ``--from-file``. Parsing here is strict: a
file that is wrong anywhere is refused as a whole, naming the line, so a
half-understood plan is never executed. A ``topic,partition,offset`` header is
accepted (spreadsheets add one); blank lines are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition
from airflow_kafka_stream.errors import OffsetPlanError

HEADER = ("topic", "partition", "offset")
# Kafka's legal topic names (kafka.common.internals.Topic): at most 249 of these characters.
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_DIGITS = re.compile(r"^[0-9]+$")


def parse_reset_csv(text: str, source: str = "reset file") -> PartitionOffsets:
    """Parse ``topic,partition,offset`` lines into offsets; raise OffsetPlanError naming the bad line."""
    offsets: PartitionOffsets = {}
    first_line_of: dict[TopicPartition, int] = {}
    seen_data = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        fields = [field.strip() for field in line.split(",")]
        if not seen_data and tuple(field.lower() for field in fields) == HEADER:
            seen_data = True
            continue
        seen_data = True
        where = f"{source} line {number} ({line[:120]!r})"
        tp, offset = _parse_row(fields, where)
        if tp in offsets:
            raise OffsetPlanError(
                f"{where}: partition {tp} is already set on line {first_line_of[tp]}; "
                "keep one line per partition", setting="value"
            )
        offsets[tp] = offset
        first_line_of[tp] = number
    if not offsets:
        raise OffsetPlanError(
            f"{source} holds no offsets; expected lines of topic,partition,offset such as 'orders,0,42'",
            setting="value"
        )
    return offsets


def _parse_row(fields: list[str], where: str) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        hint = (
            "; a 4-column file (group,topic,partition,offset) exported for several groups is not supported: "
            "keep the rows of this job's group and drop the group column"
            if len(fields) == 4
            else ""
        )
        raise OffsetPlanError(f"{where}: expected 3 columns topic,partition,offset, found {len(fields)}{hint}",
                              setting="value")
    topic, partition_text, offset_text = fields
    if not _TOPIC_NAME.match(topic):
        raise OffsetPlanError(
            f"{where}: {topic!r} is not a valid Kafka topic name (letters, digits, '.', '_', '-'; at most 249)",
            setting="value"
        )
    if not _DIGITS.match(partition_text):
        raise OffsetPlanError(f"{where}: partition {partition_text!r} must be a non-negative integer", setting="value")
    if not _DIGITS.match(offset_text):
        kind = "negative" if offset_text.startswith("-") else "not a whole number"
        raise OffsetPlanError(
            f"{where}: offset {offset_text!r} is {kind}; write the next offset to read as an integer >= 0 "
            "(use the to-earliest or to-latest strategies for the special positions)", setting="value"
        )
    return TopicPartition(topic, int(partition_text)), int(offset_text)


def render_reset_csv(offsets: Mapping[TopicPartition, int]) -> str:
    """Render offsets as Kafka's export does: ``topic,partition,offset`` lines, no header, sorted."""
    return "".join(f"{tp.topic},{tp.partition},{offsets[tp]}\n" for tp in sorted(offsets))
