"""Verification rules: a numbered table, each case saying why it expects its status."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.verify import PartitionObservation, Status, evaluate, observe
from airflow_kafka_stream.render.checkpoint import verify_text

TP = TopicPartition("orders", 0)
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
FRESH = NOW - timedelta(seconds=30)
STALE = NOW - timedelta(hours=1)


def obs(checkpoint, group, low=0, high=100, later=None):
    return PartitionObservation(TP, checkpoint, group, low, high, later)


GONE = PartitionObservation(TP, 10, 10, None, None)

# (id, observation, last batch time, expected status, reason)
CASES = [
    ("01-ok", obs(100, 100), FRESH, Status.OK, "caught up, group agrees, recent batch"),
    ("02-ok-lag-recent", obs(40, 40), FRESH, Status.OK, "lag is fine while batches keep committing"),
    ("03-ok-at-low", obs(0, 0, low=0, high=0), FRESH, Status.OK, "empty partition, offsets at both watermarks"),
    ("04-below-low", obs(5, 5, low=10), FRESH, Status.OUT_OF_RANGE, "records 5..9 expired before being read"),
    ("05-above-high", obs(150, 150), FRESH, Status.OUT_OF_RANGE, "offset past the end: topic recreated"),
    ("06-new", obs(None, None), FRESH, Status.NEW_PARTITION, "topic has a partition the checkpoint lacks"),
    ("07-new-with-group", obs(None, 3), FRESH, Status.NEW_PARTITION, "a group offset does not make it known"),
    ("08-missing-group", obs(50, None), FRESH, Status.MISSING_IN_GROUP, "nothing committed to the group"),
    ("09-behind", obs(50, 40), FRESH, Status.GROUP_BEHIND, "commits lag behind the checkpoint"),
    ("10-ahead", obs(50, 60), FRESH, Status.GROUP_AHEAD, "someone else moved the group forward"),
    ("11-stalled", obs(50, 50), STALE, Status.STALLED, "lag 50 and no batch for an hour"),
    ("12-idle-no-lag", obs(100, 100), STALE, Status.OK, "no batch for an hour is fine when there is nothing to read"),
    ("13-no-batch-time", obs(50, 50), None, Status.OK, "without a last batch time STALLED is not evaluated"),
    ("14-gone", GONE, FRESH, Status.PARTITION_GONE, "checkpoint partition no longer in the topic"),
    ("15-range-beats-group", obs(5, 1, low=10), FRESH, Status.OUT_OF_RANGE, "data loss outranks group trouble"),
    ("16-missing-beats-stall", obs(50, None), STALE, Status.MISSING_IN_GROUP, "group rules outrank STALLED"),
    ("17-behind-beats-stall", obs(50, 10), STALE, Status.GROUP_BEHIND, "behind outranks stalled"),
    ("18-at-threshold", obs(50, 50), NOW - timedelta(minutes=15), Status.OK, "exactly at the threshold is not over it"),
    ("19-above-high-by-one", obs(101, 101), FRESH, Status.OUT_OF_RANGE, "one past the high watermark is out"),
    ("20-at-high", obs(100, 100, low=100), STALE, Status.OK, "at the high watermark, all deleted, nothing to read"),
    ("21-batch-during-look", obs(50, 60, later=60), FRESH, Status.OK,
     "a running job committed batch and group commit between the two checkpoint reads: in sync"),
    ("22-ahead-of-both-reads", obs(50, 70, later=60), FRESH, Status.GROUP_AHEAD,
     "past the later checkpoint read too: someone else moved the group"),
    ("23-behind-the-first-read", obs(50, 40, later=60), FRESH, Status.GROUP_BEHIND,
     "below the first read: the later read does not excuse a group behind"),
]


@pytest.mark.parametrize(("observation", "last_batch", "expected", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_partition_status(observation, last_batch, expected, reason):
    result = evaluate([observation], now=NOW, last_batch_at=last_batch, stall_after=timedelta(minutes=15))
    verdict = result.partitions[0]
    assert verdict.status is expected, f"{reason}: got {verdict.status} ({verdict.detail})"
    assert (verdict.detail == "") == (expected is Status.OK)


@pytest.mark.parametrize(
    ("statuses_from", "overall", "exit_code"),
    [
        pytest.param([obs(100, 100)], Status.OK, 0, id="01-all-ok"),
        pytest.param([obs(100, 100), obs(50, 60)], Status.GROUP_AHEAD, 1, id="02-one-problem-fails"),
        pytest.param([obs(50, 60), obs(5, 5, low=10), obs(50, None)], Status.OUT_OF_RANGE, 1, id="03-most-severe"),
        pytest.param([], Status.OK, 0, id="04-nothing-to-check"),
    ],
)
def test_overall_is_most_severe(statuses_from, overall, exit_code):
    observations = [
        PartitionObservation(TopicPartition("t", i), o.checkpoint_offset, o.group_offset, o.low, o.high)
        for i, o in enumerate(statuses_from)
    ]
    result = evaluate(observations, now=NOW, last_batch_at=FRESH)
    assert result.status is overall
    assert result.exit_code == exit_code


def test_observe_merges_topic_and_checkpoint_partitions():
    a0, a1, a2 = (TopicPartition("a", i) for i in range(3))
    observations = observe(
        checkpoint={a0: 5, a2: 7},
        group={a0: 5},
        watermarks={a0: (0, 10), a1: (0, 3)},
    )
    assert [o.partition for o in observations] == [a0, a1, a2]
    assert observations[1] == PartitionObservation(a1, None, None, 0, 3)  # new partition
    assert observations[2] == PartitionObservation(a2, 7, None, None, None)  # gone partition
    statuses = [v.status for v in evaluate(observations, now=NOW).partitions]
    assert statuses == [Status.OK, Status.NEW_PARTITION, Status.PARTITION_GONE]


def test_renderings_carry_every_partition():
    result = evaluate([obs(40, 30)], now=NOW, last_batch_at=FRESH, group="g1")
    data = json.loads(result.to_json())
    assert data["status"] == "GROUP_BEHIND"
    assert data["group"] == "g1"
    assert data["total_lag"] == 60
    assert data["partitions"][0] | {"detail": None} == {
        "topic": "orders", "partition": 0, "checkpoint_offset": 40, "group_offset": 30, "group_in_sync": False,
        "low": 0, "high": 100, "lag": 60, "status": "GROUP_BEHIND", "detail": None,
    }
    table = verify_text(result).splitlines()
    assert table[0].split()[:8] == ["TOPIC", "PARTITION", "CHECKPOINT", "GROUP", "LOW", "HIGH", "LAG", "STATUS"]
    assert table[1].split()[:8] == ["orders", "0", "40", "30", "0", "100", "60", "GROUP_BEHIND"]
    assert table[-1].startswith("overall: GROUP_BEHIND; 1 of 1 partitions")


def test_table_shows_dash_for_unknown_values():
    result = evaluate([GONE], now=NOW)
    row = verify_text(result).splitlines()[1].split()
    assert row[:8] == ["orders", "0", "10", "10", "-", "-", "-", "PARTITION_GONE"]


@pytest.mark.parametrize(("observation", "in_sync", "reason"), [
    (obs(50, 50), True, "1-equal"),
    (obs(50, 55, later=60), True, "2-a-batch-committed-during-the-look-is-already-in-the-group"),
    (obs(50, 60, later=60), True, "3-at-the-later-read"),
    (obs(50, 61, later=60), False, "4-past-the-later-read"),
    (obs(50, 49, later=60), False, "5-below-the-first-read"),
    (obs(50, 55), False, "6-a-stopped-job-is-read-once-so-only-equal-is-in-sync"),
    (obs(50, None), False, "7-no-group-offset"),
    (obs(None, None), True, "8-a-partition-neither-has"),
    (obs(None, 3), False, "9-a-group-offset-the-checkpoint-lacks"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_group_in_sync(observation, in_sync, reason):
    assert observation.group_in_sync is in_sync, reason
