"""What `airflow-kafka-stream status` prints: the state, and why it is not what it says when it is not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_kafka_stream.ops.results import JobStatus
from airflow_kafka_stream.render.job import status_text

RUNNING = JobStatus(job_home="/jobs/orders", job="orders", state="RUNNING", recorded_state="RUNNING",
                    running=True, driver_lost=False,
                    app_version="2", heartbeat_age_seconds=1.2, generation=3, last_batch_id=41,
                    last_offsets={"orders": {"0": 10}}, group="orders-group", topics=["orders"],
                    group_commits={"committed_batch": 41, "failures": 0, "consecutive_failures": 0},
                    dead_letters=0, read_placement=None, stop_requested_at=None, error=None, standby=None)


@pytest.mark.parametrize(("status", "shown", "why"), [
    (RUNNING, ["RUNNING (running)", "version         2", "committed batch 41, 0 failed commits"], "1-healthy"),
    (replace(RUNNING, state="DEAD", recorded_state="RUNNING", running=False, driver_lost=True,
             heartbeat_age_seconds=95.0, state_reason="the driver is gone: state RUNNING but no heartbeat for 95s"),
     ["state           DEAD (its last status says RUNNING, heartbeat 95s ago): the driver is gone",
      "may restart it"], "2-a-dead-driver-is-not-shown-as-running"),
    (replace(RUNNING, state="GAVE_UP", recorded_state="RUNNING", running=False, driver_lost=True,
             state_reason="the job FAILED: x; gave up: 3 restart(s) in the last 600s"),
     ["state           GAVE_UP (its last status says RUNNING): the job FAILED: x; gave up: 3 restart(s)",
      "nothing restarts it"], "2b-recovery-gave-up"),
    (replace(RUNNING, group_commits={"committed_batch": 30, "failures": 7, "consecutive_failures": 7,
                                     "last_error": "broker down"}),
     ["GROUP COMMITS   failing: 7 in a row, last error broker down"], "3-failing-group-commits-stand-out"),
    (replace(RUNNING, standby={"state": "READY", "version": "3", "pid": 9, "host": "h", "launched_at": "t"}),
     ["standby         version 3 READY (pid 9 on h)"], "4-an-upgrade-in-progress"),
    (replace(RUNNING, state=None, running=False, last_batch_id=None, group_commits=None),
     ["NOT STARTED (no status yet)", "last batch      (none yet)"], "5-never-started"),
    (replace(RUNNING, state="FAILED", running=False, error="query died"), ["FAILED", "error           query died"],
     "6-failed-with-its-error"),
    (replace(RUNNING, read_placement={"mode": "auto", "reason": "readMode=auto: batches of up to 20000 records"}),
     ["reads batches   readMode=auto: batches of up to 20000 records"], "7-where-batches-are-read-and-why"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_status_text(status, shown, why):
    text = status_text(status)
    for line in shown:
        assert line in text, (why, text)
    assert ("(running)" in text) is status.running, why
