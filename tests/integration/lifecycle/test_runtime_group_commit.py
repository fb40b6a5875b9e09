"""Standalone group commits on a real broker: the consumer never joins the group, offsets land as given."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.runtime.group_committer import GroupCommitter, KafkaGroupCommit
from tests.kafka_utils import committed, create_topic, produce, unique

pytestmark = pytest.mark.integration


def test_committer_thread_commits_the_newest_offsets_unchanged(kafka_bootstrap):
    topic = create_topic(kafka_bootstrap, unique("commit"), 2)
    produce(kafka_bootstrap, topic, [(None, b"x")] * 5, partition=0)
    group = unique("group")
    commit = KafkaGroupCommit({"bootstrap.servers": kafka_bootstrap}, group)
    committer = GroupCommitter(commit).start()
    try:
        committer.submit(0, {TopicPartition(topic, 0): 2, TopicPartition(topic, 1): 0})
        committer.submit(1, {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 0})
        assert committer.close(30.0), committer.last_error
    finally:
        commit.close()
    assert committed(kafka_bootstrap, group, topic, 2) == {0: 5, 1: 0}
    assert committer.failures == 0 and committer.committed_batch == 1


def test_commit_can_move_offsets_back_for_a_group_without_members(kafka_bootstrap):
    """After an offset reset the job commits smaller offsets than before; Kafka must accept them."""
    topic = create_topic(kafka_bootstrap, unique("commit-back"), 1)
    produce(kafka_bootstrap, topic, [(None, b"x")] * 3, partition=0)
    group = unique("group")
    commit = KafkaGroupCommit({"bootstrap.servers": kafka_bootstrap}, group)
    try:
        commit({TopicPartition(topic, 0): 3})
        commit({TopicPartition(topic, 0): 1})
    finally:
        commit.close()
    assert committed(kafka_bootstrap, group, topic, 1) == {0: 1}
