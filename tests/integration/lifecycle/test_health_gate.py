"""The upgrade's health gate against a real broker and real drivers: no "healthy" before the new generation read.

A drop-state upgrade once passed its gate as "caught up (lag 0) ...; no input arrived" while its new generation's
first batch was still running and records waited: with no batch, its lag read 0, the savepoint was unpinned and
rollback was off before the new version had read a record. Here the new version's first batch takes longer than
the health window, on a continuous feed.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.ops.launcher import Submission
from airflow_kafka_stream.ops.upgrade import upgrade
from tests.integration.airflow.test_airflow_upgrade import APPS
from tests.integration.lifecycle.test_standby import RunningJob, fed_and_running
from tests.integration.lifecycle.test_upgrade_rehearsal import FAST

pytestmark = pytest.mark.integration

#: The new version's first batch sleeps this long: six health windows.
SLOW_SECONDS = 30


@pytest.fixture
def job(tmp_path, kafka_bootstrap):
    with fed_and_running(RunningJob(tmp_path, kafka_bootstrap)) as running:
        yield running


def test_a_drop_state_generation_is_not_healthy_before_its_own_batches(job, monkeypatch):
    monkeypatch.setenv("SLOW_FIRST_BATCH_SECONDS", str(SLOW_SECONDS))
    options = replace(FAST, standby=False, drop_state=True, health_batches=2, health_window_seconds=5,
                      health_timeout_seconds=240)
    began = time.monotonic()
    outcome = upgrade(job.jobhome, Submission("2"), job.launcher(APPS / "slow_first_batch.py"), {
        "bootstrap.servers": job.bootstrap}, options)
    took = time.monotonic() - began
    status = job.status()
    committed = read_position(job.jobhome.checkpoint_url(status["generation"])).batch_id
    assert outcome.upgraded and outcome.version == "2", outcome
    assert "no input arrived" not in outcome.health, f"records arrived all along: {outcome.health}"
    assert committed is not None and committed + 1 >= options.health_batches, (
        f"declared healthy with {committed} as the new generation's last committed batch: {outcome.health}")
    assert status["batches_this_run"] >= options.health_batches, status
    assert took > SLOW_SECONDS, f"decided after {took:.0f}s, before the first batch could commit"
