"""Reset CSV: Kafka's export format, parsed strictly (every bad line named)."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.reset_csv import parse_reset_csv, render_reset_csv
from airflow_kafka_stream.errors import OffsetPlanError

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b.x_y-z", 0)

GOOD = [
    ("01-plain", "a,0,5\na,1,7\n", {A0: 5, A1: 7}, "Kafka's export: no header"),
    ("02-header", "topic,partition,offset\na,0,5\n", {A0: 5}, "a header is accepted"),
    ("03-header-case-space", " Topic , Partition , OFFSET \na,0,5", {A0: 5}, "header spelled loosely"),
    ("04-crlf", "a,0,5\r\na,1,7\r\n", {A0: 5, A1: 7}, "files edited on Windows"),
    ("05-blank-lines", "\na,0,5\n\n\na,1,7\n\n", {A0: 5, A1: 7}, "blank lines are skipped"),
    ("06-spaces", " a , 0 , 5 ", {A0: 5}, "spaces around fields"),
    ("07-legal-topic-chars", "b.x_y-z,0,0", {B0: 0}, "dots, underscores and dashes are legal"),
    ("08-zero", "a,0,0", {A0: 0}, "offset 0 is a position"),
]


@pytest.mark.parametrize(("text", "expected", "why"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_parse_accepts(text, expected, why):
    assert parse_reset_csv(text) == expected, why


BAD = [
    ("01-empty", "", "holds no offsets", "nothing to reset"),
    ("02-only-header", "topic,partition,offset\n", "holds no offsets", "a header alone is no plan"),
    ("03-two-columns", "a,0\n", "line 1 ('a,0'): expected 3 columns topic,partition,offset, found 2", "short row"),
    ("04-four-columns", "g,a,0,5\n", "found 4; a 4-column file (group,topic", "multi-group export"),
    ("05-five-columns", "a,0,5,6,7", "found 5", "long row"),
    ("06-negative", "a,0,-1", "offset '-1' is negative", "-1 is Kafka's 'latest', not an offset"),
    ("07-non-numeric", "a,0,five", "offset 'five' is not a whole number", "words"),
    ("08-decimal", "a,0,1.5", "offset '1.5' is not a whole number", "fractions"),
    ("09-empty-offset", "a,0,", "offset '' is not a whole number", "missing value"),
    ("10-bad-partition", "a,x,1", "partition 'x' must be a non-negative integer", "partition not a number"),
    ("11-negative-partition", "a,-1,1", "partition '-1' must be", "no negative partitions"),
    ("12-duplicate", "a,0,1\na,1,2\na,0,3", "line 3 ('a,0,3'): partition a:0 is already set on line 1",
     "one line per partition"),
    ("13-bad-topic", "a b,0,1", "'a b' is not a valid Kafka topic name", "space in topic"),
    ("14-empty-topic", ",0,1", "'' is not a valid Kafka topic name", "missing topic"),
    ("15-header-not-first", "a,0,1\ntopic,partition,offset", "line 2", "a header only on the first line"),
    ("16-plus-sign", "a,0,+5", "offset '+5' is not a whole number", "sign not allowed"),
    ("17-semicolons", "a;0;5", "found 1", "wrong separator"),
]


@pytest.mark.parametrize(("text", "message", "why"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_parse_refuses(text, message, why):
    with pytest.raises(OffsetPlanError) as info:
        parse_reset_csv(text, source="plan.csv")
    assert message in str(info.value), why
    assert "plan.csv" in str(info.value)


def test_render_is_kafka_export_format_and_round_trips():
    offsets = {A1: 7, B0: 0, A0: 5}
    text = render_reset_csv(offsets)
    assert text == "a,0,5\na,1,7\nb.x_y-z,0,0\n"
    assert parse_reset_csv(text) == offsets
