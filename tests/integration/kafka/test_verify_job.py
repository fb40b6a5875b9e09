"""verify_job against a real broker: every status produced by real offsets and watermarks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.verify import Status
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.control_inputs import collect_verify_inputs, verify_job
from airflow_kafka_stream.kafka.groups import alter_group_offsets
from airflow_kafka_stream.render.checkpoint import verify_text
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


@pytest.fixture(scope="module")
def job(kafka_bootstrap):
    """Two topics, a checkpoint and a group arranged so that each partition shows one status."""
    t1 = create_topic(kafka_bootstrap, unique("verify1"), partitions=4)
    t2 = create_topic(kafka_bootstrap, unique("verify2"), partitions=3)
    for p in range(4):
        produce(kafka_bootstrap, t1, [(None, b"r")] * 10, partition=p)
    for p in range(3):
        produce(kafka_bootstrap, t2, [(None, b"r")] * 4, partition=p)
    tp = TopicPartition
    checkpoint = {
        tp(t1, 0): 10,  # OK: caught up, group agrees
        tp(t1, 1): 8,  # GROUP_BEHIND: group at 5
        tp(t1, 2): 5,  # GROUP_AHEAD: group at 9
        tp(t1, 3): 6,  # MISSING_IN_GROUP: no group commit
        tp(t2, 0): 50,  # OUT_OF_RANGE: above the high watermark 4
        tp(t2, 1): 3,  # STALLED: lag 1, last batch an hour ago
        # t2:2 missing -> NEW_PARTITION
        tp(t2, 7): 2,  # PARTITION_GONE: t2 has 3 partitions
        tp("deleted-" + t1, 0): 1,  # PARTITION_GONE: topic does not exist
    }
    group = unique("verify-group")
    alter_group_offsets(
        {"bootstrap.servers": kafka_bootstrap},
        group,
        {tp(t1, 0): 10, tp(t1, 1): 5, tp(t1, 2): 9, tp(t2, 0): 4, tp(t2, 1): 3},
    )
    return {"config": {"bootstrap.servers": kafka_bootstrap}, "group": group, "t1": t1, "t2": t2,
            "checkpoint": checkpoint}


def test_every_status_from_real_offsets(job):
    t1, t2 = job["t1"], job["t2"]
    result = verify_job(job["config"], job["group"], job["checkpoint"], [t1, t2], now=NOW,
                        last_batch_at=NOW - timedelta(hours=1), stall_after=timedelta(minutes=15))
    statuses = {str(v.partition): v.status for v in result.partitions}
    assert statuses == {
        f"{t1}:0": Status.OK,
        f"{t1}:1": Status.GROUP_BEHIND,
        f"{t1}:2": Status.GROUP_AHEAD,
        f"{t1}:3": Status.MISSING_IN_GROUP,
        f"{t2}:0": Status.OUT_OF_RANGE,
        f"{t2}:1": Status.STALLED,
        f"{t2}:2": Status.NEW_PARTITION,
        f"{t2}:7": Status.PARTITION_GONE,
        f"deleted-{t1}:0": Status.PARTITION_GONE,
    }
    assert result.status is Status.PARTITION_GONE
    assert result.exit_code == 1
    row = next(v for v in result.partitions if str(v.partition) == f"{t1}:1").observation
    assert (row.checkpoint_offset, row.group_offset, row.low, row.high, row.lag) == (8, 5, 0, 10, 2)


def test_healthy_job_is_ok(job):
    t1 = job["t1"]
    group = unique("healthy")
    caught_up = {TopicPartition(t1, p): 10 for p in range(4)}
    alter_group_offsets(job["config"], group, caught_up)
    result = verify_job(job["config"], group, caught_up, [t1], now=NOW, last_batch_at=NOW)
    assert result.status is Status.OK, verify_text(result)
    assert result.exit_code == 0
    assert result.total_lag == 0


def test_inputs_cover_existing_partitions_only(job):
    inputs = collect_verify_inputs(job["config"], job["group"], job["checkpoint"], [job["t1"], job["t2"]])
    assert inputs.partitions_by_topic == {job["t1"]: 4, job["t2"]: 3}
    assert len(inputs.watermarks) == 7
    assert inputs.group_offsets[TopicPartition(job["t1"], 3)] is None


def test_missing_subscribed_topic_is_refused(job):
    with pytest.raises(InvalidInputError, match="no-such-topic-x do not exist"):
        verify_job(job["config"], job["group"], {}, ["no-such-topic-x"], now=NOW)
