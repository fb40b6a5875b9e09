"""Reset planning with inputs fetched from a real broker (time lookups included)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.reset_scope import parse_scope
from airflow_kafka_stream.core.reset_strategy import ResetStrategy
from airflow_kafka_stream.errors import OffsetPlanError
from airflow_kafka_stream.kafka.control_inputs import collect_reset_inputs, plan_job_reset
from airflow_kafka_stream.kafka.groups import alter_group_offsets
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def timeline(kafka_bootstrap):
    """Partition 0 gets 3 records, then (milliseconds later: Kafka answers to the millisecond) 2 more; `between`
    lies in the gap."""
    topic = create_topic(kafka_bootstrap, unique("reset"), partitions=2)
    produce(kafka_bootstrap, topic, [(None, b"old")] * 3, partition=0)
    time.sleep(0.02)
    between = datetime.now(UTC)
    time.sleep(0.02)
    produce(kafka_bootstrap, topic, [(None, b"new")] * 2, partition=0)
    produce(kafka_bootstrap, topic, [(None, b"new")] * 4, partition=1)
    group = unique("reset-group")
    config = {"bootstrap.servers": kafka_bootstrap}
    checkpoint = {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 1}
    alter_group_offsets(config, group, checkpoint)
    return {"config": config, "topic": topic, "group": group, "between": between, "checkpoint": checkpoint}


def test_to_datetime_resolves_offsets_from_the_broker(timeline):
    topic = timeline["topic"]
    plan = plan_job_reset(timeline["config"], timeline["group"], timeline["checkpoint"], [topic],
                          ResetStrategy.to_datetime(timeline["between"]), parse_scope(None))
    # Partition 0: first record after `between` is offset 3. Partition 1: all 4 records are after it.
    assert plan.checkpoint_offsets() == {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 0}
    assert plan.warnings == []
    assert plan.to_csv() == f"{topic},0,3\n{topic},1,0\n"


def test_by_duration_after_the_last_record_goes_to_the_end(timeline):
    topic = timeline["topic"]
    now = datetime.now(UTC) + timedelta(minutes=10)
    plan = plan_job_reset(timeline["config"], timeline["group"], timeline["checkpoint"], [topic],
                          ResetStrategy.by_duration("PT1M", now), parse_scope(None))
    assert plan.checkpoint_offsets() == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 4}


def test_inputs_hold_group_and_watermarks(timeline):
    topic = timeline["topic"]
    inputs = collect_reset_inputs(timeline["config"], timeline["group"], timeline["checkpoint"], [topic],
                                  ResetStrategy.shift_by(-2), parse_scope(f"{topic}:1"))
    assert inputs.watermarks == {TopicPartition(topic, 0): (0, 5), TopicPartition(topic, 1): (0, 4)}
    assert inputs.group == timeline["checkpoint"]
    assert inputs.timestamp_offsets == {}, "no time lookup for a strategy without a time"


def test_scope_and_strict_are_checked_against_the_real_topic(timeline):
    topic = timeline["topic"]
    args = (timeline["config"], timeline["group"], timeline["checkpoint"], [topic])
    with pytest.raises(OffsetPlanError, match=r"partition\(s\) 5 of topic"):
        plan_job_reset(*args, ResetStrategy.to_datetime(timeline["between"]), parse_scope(f"{topic}:5"))
    with pytest.raises(OffsetPlanError, match="above the high watermark 4"):
        plan_job_reset(*args, ResetStrategy.shift_by(10), parse_scope(f"{topic}:1"), strict=True)
    clamped = plan_job_reset(*args, ResetStrategy.shift_by(10), parse_scope(f"{topic}:1"))
    assert clamped.checkpoint_offsets() == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 4}
