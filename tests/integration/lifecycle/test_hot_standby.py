"""A hot standby with real drivers (example pipeline processes), a real broker, no Airflow.

One job, fed continuously: its driver is killed with ``kill -9`` and its hot standby takes the job over; a
supervisor's pass launches the next hot standby; that driver is then frozen (SIGSTOP of its process group,
Python and JVM) for longer than the liveness rule allows, its hot standby takes over, and when it is thawed it
finds another driver holding the job and exits without writing anything of it; an upgrade with a hot standby
present ends it, and a hot standby of the new version follows; a graceful stop is never taken over. Record by
record, nothing is lost or written twice across it all.

A death past the restart budget (not taken over; the supervisor gives up naming the failover) runs through the
full stack, in test_airflow_stack.py; a restore's stop is a graceful stop, and the restored job's submit gets its
hot standby from the keeper as any submit does (tests/unit/ops/test_hot_standby_keeper.py).
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.core.failover import FAILOVER_OPERATION
from airflow_kafka_stream.core.watchdog import SUPERVISOR, Policy
from airflow_kafka_stream.ops.hot_standby import keep_hot_standby, set_wish
from airflow_kafka_stream.ops.inspect import job_status
from airflow_kafka_stream.ops.launcher import Submission
from airflow_kafka_stream.ops.standby import live_standby, wait_ready
from airflow_kafka_stream.ops.stop import stop_job
from airflow_kafka_stream.ops.submit import record_submission
from airflow_kafka_stream.ops.upgrade import upgrade
from airflow_kafka_stream.ops.watchdog import watch
from airflow_kafka_stream.storage.jobhome import STANDBY_RECORD
from airflow_kafka_stream.storage.processes import process_alive
from tests.integration.airflow.test_airflow_upgrade import output_ids
from tests.integration.lifecycle.test_runtime_lifecycle import wait_for
from tests.integration.lifecycle.test_standby import PARTITIONS, RunningJob, fed_and_running
from tests.integration.lifecycle.test_upgrade_rehearsal import FAST
from tests.kafka_utils import watermarks

pytestmark = pytest.mark.integration

#: The drivers beat every 3 s (RunningJob): a frozen one is dead by the rule after 12 s without a heartbeat.
POLICY = Policy(max_heartbeat_age=12.0, backoff_seconds=5.0)
#: The bar for "the job commits its next batch within a few seconds" on the suite's loaded two cores (the figure
#: itself is the benchmark's, ``bench/run watchdog``).
TAKEOVER_BAR_SECONDS = 25.0


def ready_hot_standby(job: RunningJob):
    handle = live_standby(job.jobhome)
    assert handle is not None and job.jobhome.read_control(STANDBY_RECORD).get("hot"), "a hot standby was launched"
    return wait_ready(job.jobhome, handle, timeout=240, poll=0.2)


def taken_over_by(job: RunningJob, pid: int, since: float) -> float:
    """Seconds from ``since`` until driver ``pid`` holds the job and committed a batch."""
    job.first_batch_of(pid, timeout=120)
    return time.monotonic() - since


def test_a_hot_standby_takes_over_a_killed_and_a_frozen_driver_and_never_a_stopped_job(tmp_path, kafka_bootstrap):
    job = RunningJob(tmp_path, kafka_bootstrap)
    with fed_and_running(job):
        home = job.jobhome
        first = job.status()
        record_submission(home, Submission("1"), datetime.now(UTC))  # what a submit records; the keeper replays it
        set_wish(home, True, POLICY)
        assert keep_hot_standby(home, job.launcher()) is not None
        standby = ready_hot_standby(job)
        assert keep_hot_standby(home, job.launcher()) is None, "one live standby is enough"
        shown = job_status(home).standby
        assert (shown["hot"], shown["state"], shown["pid"]) == (True, "READY", standby.pid), shown

        # 1. kill -9 of the driver: the hot standby holds the job and commits within seconds.
        killed_at = time.monotonic()
        job.kill(first["pid"])
        took = taken_over_by(job, standby.pid, killed_at)
        assert took < TAKEOVER_BAR_SECONDS, f"the failover took {took:.1f}s"
        failovers = [r for r in home.history() if r["operation"] == FAILOVER_OPERATION]
        assert len(failovers) == 1 and failovers[0]["args"]["dead_pid"] == first["pid"], failovers
        assert 0 < failovers[0]["after"]["without_driver_seconds"] < TAKEOVER_BAR_SECONDS + 4, failovers
        assert home.read_control(STANDBY_RECORD)["state"] == rules.StandbyState.ACTIVE
        assert job.status()["generation"] == first["generation"], "the same checkpoint goes on"
        shown = job_status(home).standby
        assert (shown["hot"], shown["state"]) == (True, "NONE") and "has none live" in shown["note"], shown

        # 2. A supervisor's pass finds the job running without a standby and launches the next one.
        passed = watch(home, {"bootstrap.servers": kafka_bootstrap}, POLICY, job.launcher(), restarter=SUPERVISOR)
        assert passed.action == "nothing", passed
        second = ready_hot_standby(job)
        assert second.pid != standby.pid

        # 3. The driver frozen (Python and JVM) past the liveness rule: its standby takes over; thawed, the old
        #    driver finds the job held by another and exits, writing nothing of it.
        frozen = standby.pid
        os.killpg(frozen, signal.SIGSTOP)
        try:
            taken_over_by(job, second.pid, time.monotonic())
        finally:
            os.killpg(frozen, signal.SIGCONT)
        # On this host the standby ends the frozen driver before it takes the job (a driver that resumed
        # mid-write would write on); its self-fencing is for a driver on another host.
        assert next(p for p in job.procs if p.pid == frozen).wait(90) is not None
        held = job.status()
        assert (held["pid"], held["state"]) == (second.pid, "RUNNING"), "the thawed driver wrote no status"
        assert len([r for r in home.history() if r["operation"] == FAILOVER_OPERATION]) == 2

        # 4. An upgrade with a hot standby present: it ends the hot standby and launches its own (the next
        #    version's) standby; a hot standby of the new version follows; nothing is taken over.
        watch(home, None, POLICY, job.launcher(), restarter=SUPERVISOR)
        third = ready_hot_standby(job)
        upgraded = upgrade(home, Submission("2"), job.launcher(), {"bootstrap.servers": kafka_bootstrap}, FAST)
        assert (upgraded.upgraded, upgraded.version) == (True, "2"), upgraded
        assert not process_alive(third.pid, third.host), "the upgrade ended the hot standby of version 1"
        following = ready_hot_standby(job)
        assert following.app_version == "2" and home.spec()["version"] == "2"
        assert len([r for r in home.history() if r["operation"] == FAILOVER_OPERATION]) == 2, "no takeover"

        # 5. A graceful stop with a hot standby present (a restore's stop is one): it stands down, nothing takes
        #    the job over.
        running = job.status()["pid"]
        sent = job.feeder.stop()
        wanted = {job.topic: {str(p): high for p, (_low, high) in
                              watermarks(job.bootstrap, job.topic, PARTITIONS).items()}}
        wait_for(lambda: job.status().get("last_offsets") == wanted, "the job to catch up", 120)
        assert stop_job(home, timeout=60, poll=0.2).was_running
        wait_for(lambda: not process_alive(following.pid, following.host), "the hot standby to stand down", 60)
        record = home.read_control(STANDBY_RECORD)
        assert record["state"] == rules.StandbyState.ENDED and "stopped on purpose" in record["error"], record
        assert (job.status()["state"], job.status()["pid"]) == ("STOPPED", running)
        assert len([r for r in home.history() if r["operation"] == FAILOVER_OPERATION]) == 2
        assert all(r["operation"] != "watchdog-restart" for r in home.history())

    # Record by record, across the kill, the freeze and the stop: nothing lost, nothing written twice.
    ids = output_ids(job.output)
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert set(ids) == {f"e{i}" for i in range(sent)}, "a record was lost"
