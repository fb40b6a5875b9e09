"""The warm standby's handoff steps with real drivers (example pipeline processes), a real broker, no Airflow.

One job, fed continuously, runs for the whole module. Standbys that cannot come up, never become ready (their
source never answers, say) or come second leave it running untouched; a standby killed at each step of the handoff leaves a job that
restarts cleanly; record by record, nothing is lost or duplicated across it all. The Airflow upgrade through
a standby is in test_airflow_upgrade.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops.launcher import LaunchedDriver, Launcher, Submission
from airflow_kafka_stream.ops.standby import hand_over, launch_standby, wait_ready
from airflow_kafka_stream.ops.stop import stop_job
from airflow_kafka_stream.ops.upgrade import UpgradeOptions, upgrade
from airflow_kafka_stream.storage.jobhome import STANDBY_RECORD, JobHome
from airflow_kafka_stream.storage.processes import process_alive
from tests.conftest import ROOT
from tests.integration.airflow.test_airflow_upgrade import APPS, Feeder, output_ids
from tests.integration.cli_helpers import cli_subprocess
from tests.integration.lifecycle.test_runtime_lifecycle import wait_for
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2


class RunningJob:
    """The module's job: its home, its drivers (old versions, standbys), started as detached processes."""

    def __init__(self, work: Path, bootstrap: str, extra: tuple[str, ...] | list[str] = ()):
        self.work, self.bootstrap, self.extra = work, bootstrap, list(extra)
        self.topic = create_topic(bootstrap, unique("standby"), PARTITIONS)
        self.home, self.output, self.group = work / "home", work / "out", unique("standby-group")
        self.jobhome = JobHome(str(self.home))
        self.procs: list[subprocess.Popen] = []

    def start(self, version: str, app: Path | None = None, env: dict[str, str] | None = None,
              log: str | None = None) -> subprocess.Popen:
        program = [str(app)] if app else ["-m", "airflow_kafka_stream.jobs.example_pipeline"]
        args = ["--home", str(self.home), "--bootstrap", self.bootstrap, "--topic", self.topic, "--group", self.group,
                "--output", str(self.output), "--heartbeat-seconds", "3", "--app-version", version,
                "--trigger-interval", "500 milliseconds", *self.extra]
        out = open(log or self.work / f"driver-{version}-{len(self.procs)}.log", "ab")  # noqa: SIM115 - the driver's
        proc = subprocess.Popen([sys.executable, *program, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})}, start_new_session=True)
        self.procs.append(proc)
        return proc

    def launcher(self, app: Path | None = None) -> Launcher:
        """What ops.standby.launch_standby calls: start the submitted version with the standby's environment."""
        job = self

        class DirectLauncher:
            def launch(self, submission: Submission, log: str, extra_env=None) -> LaunchedDriver:
                started = job.start(submission.app_version, app, dict(extra_env or {}), log)
                return LaunchedDriver(started.pid, socket.gethostname(), log)

        return DirectLauncher()

    def status(self) -> dict:
        return self.jobhome.status() or {}

    def first_batch_of(self, pid: int, timeout: float = 240.0) -> dict:
        return wait_for(lambda: (s := self.status()).get("pid") == pid and s.get("state") == "RUNNING"
                        and (s.get("batches_this_run") or 0) >= 1 and s, f"a committed batch by driver {pid}",
                        timeout)

    def kill(self, pid: int) -> None:
        os.killpg(pid, signal.SIGKILL)
        next(p for p in self.procs if p.pid == pid).wait(30)


@contextmanager
def fed_and_running(running: RunningJob) -> Iterator[RunningJob]:
    """``running`` with version 1 started on a continuous feed (it committed a batch); every driver killed after."""
    running.feeder = Feeder(running.bootstrap, running.topic)
    running.feeder.start()
    try:
        running.first_batch_of(running.start("1").pid)
        yield running
    finally:
        running.feeder.stop()
        for proc in running.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


@pytest.fixture(scope="module")
def job(tmp_path_factory, kafka_bootstrap):
    with fed_and_running(RunningJob(tmp_path_factory.mktemp("standby"), kafka_bootstrap)) as running:
        yield running


def runs_untouched(job: RunningJob, before: dict) -> None:
    """The old version still runs as it did: same driver, generation and query, still committing; no stop,
    no savepoint, nothing of the job written by a standby."""
    after = wait_for(lambda: (s := job.status()).get("last_batch_id", -1) > before["last_batch_id"] and s,
                     "the old version to commit another batch")
    assert (after["state"], after["pid"], after["generation"], after["query_id"]) == (
        "RUNNING", before["pid"], before["generation"], before["query_id"])
    assert not (job.home / "control" / "stop").exists()
    assert not (job.home / "savepoints").exists() or not any((job.home / "savepoints").iterdir())
    assert {r["operation"] for r in job.jobhome.history()} & {"stop", "stop-request", "restore"} == set()


def test_standbys_that_fail_never_get_ready_or_come_second_leave_the_job_untouched(job):
    before = job.status()
    # 1. A broken version: its driver exits before it registers; the upgrade fails before any downtime.
    broken = launch_standby(job.jobhome, Submission("2"), job.launcher(APPS / "broken_version.py"))
    with pytest.raises(JobStateError, match="failed before any downtime: the standby's process exited") as failed:
        wait_ready(job.jobhome, broken, timeout=120, poll=0.2)
    assert "old version keeps running untouched" in str(failed.value)
    assert "a dependency this build needs is missing" in str(failed.value), "the standby's log tail is shown"
    # 2. A version that never comes up: while it starts, a second standby is refused; at its timeout it is ended.
    unready = launch_standby(job.jobhome, Submission("3"), job.launcher(APPS / "unready_version.py"))
    with pytest.raises(JobStateError, match="two standbys for one job are refused"):
        launch_standby(job.jobhome, Submission("4"), job.launcher())
    with pytest.raises(JobStateError, match="not ready within 3s"):
        wait_ready(job.jobhome, unready, timeout=3, poll=0.2)
    assert process_alive(unready.pid, unready.host) is False, "the unready standby's process was ended"
    assert job.jobhome.read_control(STANDBY_RECORD)["state"] == rules.StandbyState.ENDED
    # 3. An abandoned upgrade's standby, ended by an operator at a terminal; `status` shows it until then.
    abandoned = launch_standby(job.jobhome, Submission("5"), job.launcher(APPS / "unready_version.py"))
    shown = json.loads(cli_subprocess("status", "--job-home", job.home, "--json").stdout)
    assert (shown["running"], shown["standby"]["version"], shown["standby"]["pid"]) == (True, "5", abandoned.pid)
    ended = cli_subprocess("standby", "end", "--job-home", job.home, "--reason", "upgrade abandoned")
    assert ended.returncode == 0 and "the running job was not touched" in ended.stdout, ended.stdout + ended.stderr
    assert process_alive(abandoned.pid, abandoned.host) is False
    assert (job.jobhome.read_control(STANDBY_RECORD)["state"],
            job.jobhome.read_control(STANDBY_RECORD)["error"]) == (rules.StandbyState.ENDED, "upgrade abandoned")
    history = len(job.jobhome.history())
    again = cli_subprocess("standby", "end", "--job-home", job.home)
    assert again.returncode == 2 and "has no live standby (the last one is ENDED)" in again.stderr, again.stderr
    assert len(job.jobhome.history()) == history, "a refusal changes nothing"
    assert json.loads(cli_subprocess("status", "--job-home", job.home, "--json").stdout)["standby"] is None
    # 4. The Airflow task that launched a standby is killed (marked failed, or its upgrade run cancelled): its
    # on_kill ends the standby, as nothing else would until the standby's own wait for a go times out.
    from airflow_kafka_stream.operators.standby import StreamStandbyOperator

    killed = launch_standby(job.jobhome, Submission("6"), job.launcher(APPS / "unready_version.py"))
    task = StreamStandbyOperator(task_id="start_standby", job_home=str(job.home), app_version="6")
    task._standby = killed.to_dict()
    task.on_kill()
    assert process_alive(killed.pid, killed.host) is False, "the killed task's standby was ended"
    assert job.jobhome.read_control(STANDBY_RECORD)["state"] == rules.StandbyState.ENDED
    runs_untouched(job, before)


def test_a_standby_whose_source_never_answers_is_never_ready_and_the_upgrade_ends_before_the_stop(job):
    """READY means the query started ahead of the go has its source up (it answered from Spark's Python process
    that serves it): a version whose source hangs there is no READY standby, and the upgrade through it is
    refused before the old version is asked to stop, which keeps running untouched."""
    before = job.status()
    options = UpgradeOptions(standby_ready_timeout_seconds=300, poll_seconds=0.2)
    with pytest.raises(JobStateError, match="failed before any downtime") as failed:
        upgrade(job.jobhome, Submission("8"), job.launcher(APPS / "silent_source_version.py"),
                {"bootstrap.servers": job.bootstrap}, options)
    assert "did not answer within 15s" in str(failed.value), str(failed.value)
    record = job.jobhome.read_control(STANDBY_RECORD)
    assert record["state"] == rules.StandbyState.FAILED and record["version"] == "8", record
    assert "ready_at" not in record, "the standby never reported READY"
    assert not process_alive(record["pid"], record["host"]), "the standby's process was ended"
    runs_untouched(job, before)


def test_a_standby_killed_at_each_step_of_the_handoff_leaves_a_job_that_restarts_cleanly(job):
    # 1. Killed while it warms up (or waits, ready): the old version runs on untouched.
    before = job.status()
    first = launch_standby(job.jobhome, Submission("2"), job.launcher())
    seen = wait_for(lambda: (job.jobhome.read_control(STANDBY_RECORD) or {}).get("state") in
                    (rules.StandbyState.STARTING, rules.StandbyState.READY) and job.jobhome.read_control(STANDBY_RECORD)["state"],
                    "the standby to register", 240)
    job.kill(first.pid)
    runs_untouched(job, before)

    # 2. Killed after the old version stopped with its savepoint, before the go: the handoff is refused,
    #    and the job (stopped, savepoint taken) starts again cold from its checkpoint.
    second = launch_standby(job.jobhome, Submission("2"), job.launcher())  # the killed one no longer counts as live
    wait_ready(job.jobhome, second, timeout=240, poll=0.2)
    stopped = stop_job(job.jobhome, timeout=60, savepoint=True, poll=0.2)
    assert stopped.was_running and stopped.savepoint.id
    job.kill(second.pid)
    with pytest.raises(JobStateError, match="can no longer take over"):
        hand_over(job.jobhome, second, stopped)
    restarted = job.first_batch_of(job.start("2").pid)
    assert restarted["generation"] == before["generation"]

    # 3. Killed right after the go, while it takes the job: the job starts again cleanly at once (the lock and
    #    the fresh STARTING heartbeat it may have left are its gone process's, so neither holds the start up).
    third = launch_standby(job.jobhome, Submission("3"), job.launcher())
    wait_ready(job.jobhome, third, timeout=240, poll=0.2)
    handed = hand_over(job.jobhome, third, stop_job(job.jobhome, timeout=60, savepoint=True, poll=0.2))
    assert handed.pid == third.pid and handed.action == "handed-over"
    wait_for(lambda: (job.jobhome.read_control(STANDBY_RECORD) or {}).get("state") != rules.StandbyState.READY,
             "the standby to take the go")
    job.kill(third.pid)
    job.first_batch_of(job.start("3").pid)

    # Record by record, across the kills and restarts: nothing lost, nothing duplicated.
    sent = job.feeder.stop()
    wanted = {job.topic: {str(p): high for p, (_low, high) in watermarks(job.bootstrap, job.topic, PARTITIONS).items()}}
    wait_for(lambda: job.status().get("last_offsets") == wanted, "the job to catch up", 120)
    ids = output_ids(job.output)
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert set(ids) == {f"e{i}" for i in range(sent)}, "a record was lost"
    assert seen in (rules.StandbyState.STARTING, rules.StandbyState.READY)
