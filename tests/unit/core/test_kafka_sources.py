"""KafkaSources: which source line a target belongs to, and the shapes that are refused (pure logic)."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.checkpoint_log import parse_offset_log
from airflow_kafka_stream.core.kafka_sources import KafkaSources, kafka_source_lines
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import InvalidInputError

A0, A1, A2, B0, C0 = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2),
                      TopicPartition("b", 0), TopicPartition("c", 0))
RATE = '{"offset":500,"timestamp":50000}'


def test_only_kafka_shaped_lines_are_sources():
    lines = ['{"a":{"0":1}}', None, RATE, '{"b": {"0": 2}}']
    assert kafka_source_lines(lines) == {0: {A0: 1}, 3: {B0: 2}}


@pytest.mark.parametrize(
    ("by_index", "targets", "expected"),
    [
        pytest.param({0: {A0: 5, A1: 5}, 1: {B0: 3}}, {A0: 1, A1: 2, B0: 0}, {0: {A0: 1, A1: 2}, 1: {B0: 0}},
                     id="each-partition-to-its-line"),
        pytest.param({0: {A0: 5, A1: 5}, 1: {B0: 3}}, {A0: 1, A1: 2, A2: 0, B0: 0},
                     {0: {A0: 1, A1: 2, A2: 0}, 1: {B0: 0}}, id="new-partition-to-the-line-of-its-topic"),
        pytest.param({1: {A0: 5}}, {A0: 1, C0: 4}, {1: {A0: 1, C0: 4}}, id="one-source-takes-everything"),
        pytest.param({0: {A0: 5}, 2: {B0: 3}}, {A0: 1}, {0: {A0: 1}, 2: {}},
                     id="a-source-without-target-gets-an-empty-line"),
    ],
)
def test_split(by_index, targets, expected):
    assert KafkaSources(by_index).split(targets) == expected


@pytest.mark.parametrize(
    ("by_index", "targets", "needle"),
    [
        pytest.param({0: {A0: 5}, 1: {B0: 3}}, {C0: 1}, "none of its 2 Kafka sources reads topic 'c'",
                     id="topic-of-no-source"),
        pytest.param({0: {A0: 5}, 1: {A1: 3}}, {A2: 1}, "sources [0, 1] all read topic 'a'",
                     id="new-partition-of-a-topic-in-two-sources"),
    ],
)
def test_split_refuses_a_target_without_a_single_home(by_index, targets, needle):
    with pytest.raises(InvalidInputError) as caught:
        KafkaSources(by_index).split(targets)
    assert needle in str(caught.value)


def test_a_partition_in_two_sources_has_no_single_group_offset():
    sources = KafkaSources({0: {A0: 5, B0: 1}, 1: {B0: 3}})
    assert sources.shared_partitions() == {B0: [0, 1]}
    with pytest.raises(InvalidInputError, match=r"b:0 \(sources 0, 1\)"):
        sources.require_one_position_per_partition("an offset reset")


def test_no_kafka_source_is_named_as_such():
    with pytest.raises(InvalidInputError, match="has no Kafka source"):
        KafkaSources.of_lines([RATE, None]).require_any()


def test_offset_log_replaces_several_source_lines_and_keeps_the_others():
    entry = parse_offset_log(f'v1\n{{"batchWatermarkMs":0}}\n{{"a":{{"0":5}}}}\n{RATE}\n{{"b": {{"0": 3}}}}')
    moved = entry.with_sources_offsets({0: {A0: 1}, 2: {B0: 0}})
    assert moved.source_lines == ('{"a":{"0":1}}', RATE, '{"b":{"0":0}}')
    assert moved.kafka_sources().union() == {A0: 1, B0: 0}
