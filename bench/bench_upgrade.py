"""Downtime of an upgrade against a crash: ``upgrade_downtime_vs_restart`` and
``standby_upgrade_downtime_vs_restart``.

One example-pipeline job, fed continuously, is taken down and brought back in three ways, alternating:

* upgrade (the upgrade operators' path): request a stop after the running batch, wait for STOPPED, take a
  savepoint, start the next version's driver on the checkpoint, wait for its first committed batch;
* standby upgrade (the upgrade operators' default path): the next version's driver is started as a warm
  standby and waits until READY (not downtime: the old version still runs); then the same stop and
  savepoint, the go, and the standby's first committed batch;
* crash: ``kill -9`` the driver and start it again on the same checkpoint (it waits until the dead driver's
  heartbeat is stale, as any restart must), wait for its first committed batch.

Each figure is the median time from the stop request (or the kill) to the new driver's first committed
batch; the ratios are upgrade / crash and standby upgrade / crash. The cold ones are dominated by
starting a driver (JVM, session, first plan); the standby's by the drain, the savepoint and the query start.
The stop is polled every 0.1 s in the standby path (the cold path keeps ops.stop's 0.5 s: noise there).
Drivers beat every 2 s: at 1 s, a loaded machine makes a driver fence itself (two silent intervals).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROUNDS = int(os.environ.get("BENCH_UPGRADE_ROUNDS", "2"))
PARTITIONS = 2


class Job:
    def __init__(self, work: Path, bootstrap: str, topic: str):
        self.home, self.output, self.bootstrap, self.topic = work / "home", work / "out", bootstrap, topic
        self.proc: subprocess.Popen | None = None
        self.procs: list[subprocess.Popen] = []
        self.version = 0

    def start(self, env: dict[str, str] | None = None) -> float:
        self.version += 1
        args = [sys.executable, "-m", "airflow_kafka_stream.jobs.example_pipeline", "--home", str(self.home),
                "--bootstrap", self.bootstrap, "--topic", self.topic, "--group", "bench-upgrade",
                "--output", str(self.output), "--heartbeat-seconds", "2", "--app-version", str(self.version),
                "--trigger-interval", "1 second"]
        started = time.time()
        log = open(self.home.parent / f"driver-{self.version}.log", "wb")  # noqa: SIM115 - lives with the driver
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        self.procs.append(self.proc)
        return started

    def first_batch_after(self, since: float, timeout: float = 300.0) -> float:
        from airflow_kafka_stream.storage.jobhome import JobHome

        deadline = time.monotonic() + timeout
        home = JobHome(str(self.home))
        while time.monotonic() < deadline:
            status = home.status() or {}
            if status.get("state") == "RUNNING" and (status.get("batches_this_run") or 0) >= 1 and \
                    status.get("heartbeat_epoch", 0) > since and status.get("pid") == self.proc.pid:
                return time.time()
            time.sleep(0.1)
        raise SystemExit(f"no batch committed within {timeout}s; see {self.home.parent}")


def feed(bootstrap: str, topic: str, stop: threading.Event) -> None:
    from tests.kafka_utils import produce

    i = 0
    while not stop.is_set():
        produce(bootstrap, topic, [(None, json.dumps({"id": f"e{i + k}", "key": "k", "amount": 1}))
                                   for k in range(10)])
        i += 10
        time.sleep(0.2)


def upgrade(job: Job) -> float:
    from airflow_kafka_stream.ops.stop import stop_job
    from airflow_kafka_stream.storage.jobhome import JobHome

    asked = time.time()
    stop_job(JobHome(str(job.home)), timeout=120, savepoint=True)  # drain, STOPPED, savepoint: the stop operator
    job.proc.wait(60)
    job.start()
    return job.first_batch_after(asked) - asked


def standby_upgrade(job: Job) -> float:
    from airflow_kafka_stream.ops.launcher import LaunchedDriver, Submission
    from airflow_kafka_stream.ops.standby import hand_over, launch_standby, wait_ready
    from airflow_kafka_stream.ops.stop import stop_job
    from airflow_kafka_stream.storage.jobhome import JobHome

    home, old = JobHome(str(job.home)), job.proc

    class DirectLauncher:
        def launch(self, submission: Submission, log: str, extra_env=None) -> LaunchedDriver:
            job.start(dict(extra_env or {}))
            return LaunchedDriver(job.proc.pid, socket.gethostname(), log)

    handle = launch_standby(home, Submission(str(job.version + 1)), DirectLauncher())
    wait_ready(home, handle, timeout=300, poll=0.2)  # the old version still runs: not downtime
    asked = time.time()
    hand_over(home, handle, stop_job(home, timeout=120, savepoint=True, poll=0.1))
    old.wait(60)
    return job.first_batch_after(asked) - asked


def crash(job: Job) -> float:
    killed = time.time()
    os.killpg(job.proc.pid, signal.SIGKILL)
    job.proc.wait(60)
    job.start()
    return job.first_batch_after(killed) - killed


def main() -> int:
    from tests.kafka_utils import create_topic, unique

    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    topic = create_topic(bootstrap, unique("bench-upgrade"), PARTITIONS)
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(bootstrap, topic, stop), daemon=True)
    feeder.start()
    with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as tmp:
        job = Job(Path(tmp), bootstrap, topic)
        try:
            job.first_batch_after(job.start())
            paths = {"upgrade": upgrade, "standby": standby_upgrade, "crash": crash}
            times: dict[str, list[float]] = {kind: [] for kind in paths}
            kinds = list(paths)
            for round_ in range(ROUNDS):
                for kind in kinds[round_ % 3:] + kinds[:round_ % 3]:  # each path in each position in turn
                    times[kind].append(paths[kind](job))
            up, warm, down = (statistics.median(times[kind]) for kind in ("upgrade", "standby", "crash"))
            print(f"# upgrade {[round(t, 1) for t in times['upgrade']]} s, standby upgrade "
                  f"{[round(t, 1) for t in times['standby']]} s, kill -9 and restart "
                  f"{[round(t, 1) for t in times['crash']]} s", file=sys.stderr)
            print(f"upgrade_downtime_vs_restart: {up / down:.2f}")
            print(f"standby_upgrade_downtime_vs_restart: {warm / down:.2f}")
        finally:
            stop.set()
            for proc in job.procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
