"""Verify a job while it runs and commits batch after batch: what a nightly check of a busy job sees.

The example pipeline runs as a driver process with a producer that keeps it busy (a batch every few hundred
milliseconds). Each verification reads the checkpoint, the group and the watermarks one after another while
batches and their group commits land in between; a healthy job must read OK every time, never GROUP_AHEAD
(a batch committed between the checkpoint's read and the group's) nor GROUP_BEHIND (a group commit on its
way). Then the group is moved behind for real and the job stopped: that drift must still be reported.
"""

from __future__ import annotations

import threading
import time

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.kafka.groups import alter_group_offsets
from airflow_kafka_stream.ops.context import build_context
from airflow_kafka_stream.ops.verify import verify
from tests.integration.lifecycle.test_exactly_once import PARTITIONS, Pipeline, events
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

LOOKS = 25


def test_a_busy_running_job_verifies_ok_at_every_look_and_real_drift_still_shows(kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("verify-busy"), PARTITIONS)
    group = unique("verify-busy-group")
    produce(kafka_bootstrap, topic, events(0, 20))
    done = threading.Event()

    def feed() -> None:
        sent = 20
        while not done.wait(0.15):
            produce(kafka_bootstrap, topic, events(sent, 4))
            sent += 4

    pipeline = Pipeline(tmp_path, kafka_bootstrap, topic, group, "--max-offsets-per-trigger", "6")
    feeder = threading.Thread(target=feed, daemon=True)
    try:
        pipeline.wait_for(lambda: (pipeline.status().get("last_batch_id") or -1) >= 2, "a few batches")
        feeder.start()
        ctx = build_context(job_home=str(pipeline.home), bootstrap_servers=kafka_bootstrap)
        seen_batches, looks, deadline = set(), 0, time.monotonic() + 120
        while (looks < LOOKS or len(seen_batches) < 6) and time.monotonic() < deadline:
            result = verify(ctx)
            looks += 1
            assert result.status.value == "OK", [(v.observation, v.status, v.detail) for v in result.problems()]
            seen_batches.add(pipeline.status().get("last_batch_id"))
        assert len(seen_batches) >= 6, f"the job must commit batches while it is looked at ({looks} looks)"
    finally:
        done.set()
        feeder.join(10)
        pipeline.request_stop()
        assert pipeline.wait_exit() == 0, pipeline.log_tail()

    # Stopped, with its group moved behind on one partition: a drift the looks again do not excuse.
    stopped = verify(build_context(job_home=str(pipeline.home), bootstrap_servers=kafka_bootstrap))
    assert stopped.ok
    first = stopped.partitions[0].observation
    alter_group_offsets({"bootstrap.servers": kafka_bootstrap}, group,
                        {TopicPartition(first.partition.topic, first.partition.partition): 0})
    drifted = verify(build_context(job_home=str(pipeline.home), bootstrap_servers=kafka_bootstrap))
    assert [v.status.value for v in drifted.problems()] == ["GROUP_BEHIND"]
