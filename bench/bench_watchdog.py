"""Recovery from a crash through Airflow against a scripted restart: ``watchdog_recovery_vs_restart``.

The example pipeline is submitted through the full Airflow stack (api-server, scheduler, dag-processor,
triggerer; ``stream_submit`` triggered through the REST API) while events are fed. Then its driver is killed
(``kill -9`` of its process groups) and brought back in two ways, each timed from the kill to the new driver's
first committed batch:

* scripted: the kill, then at once the restart a watchdog makes (the recorded submission started again
  through Airflow's launcher, ``ops.submit.replay`` with ``AirflowSparkLauncher``, as ``ops.watchdog.watch``
  does), called from this script;
* Airflow: ``stream_supervisor`` is triggered once beforehand and deferred; after the kill nothing is
  triggered: its trigger sees the driver gone (the one liveness rule), the task resumes, runs a watchdog
  pass and restarts the job.

* failover: the job stopped and submitted again through ``stream_submit`` with ``hot_standby`` on (a new
  chapter of the restart budget), the supervisor triggered again; each round waits until the hot standby is
  READY, kills the job's driver alone (its process group: Python and JVM), and times until the hot standby,
  now the job's driver, committed its first batch. The supervisor launches the next hot standby.

The scripted rounds run first (a supervisor would race them), then the supervised ones; between supervised
rounds the example DAG's backoff (60 s after a restart) is waited out before the kill, not counted. The ratio
``watchdog_recovery_vs_restart`` is median Airflow / median scripted; what it adds is the trigger's poll (1 s),
the resume of a deferred task (scheduler, executor, a task process) and one pass. ``failover_vs_restart`` is
median failover / median scripted: what a hot standby saves of a cold driver start.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from smoke import count

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROUNDS = count("BENCH_WATCHDOG_ROUNDS", 2, 1)
PARTITIONS = 2
BACKOFF_SECONDS = 60  # dags/stream_supervisor.py

from bench.bench_upgrade import feed  # noqa: E402 - after the path above; the same feed as the upgrade bench


def kill(home: Path) -> tuple[float, int]:
    """``kill -9`` every process of the job's driver (their process groups); the kill's time and the old pid."""
    from airflow_kafka_stream.ops.guard import job_is_running
    from airflow_kafka_stream.storage.jobhome import JobHome
    from tests.integration.airflow.test_airflow_submit import drivers_of, kill_drivers

    old = (JobHome(str(home)).status() or {}).get("pid")
    killed = time.time()
    kill_drivers(home)
    # A SIGKILL takes effect a moment later, and the JVM can outlive its Python parent by a moment more: until
    # both are gone the job is not provably dead (the one liveness rule), for a watchdog or a scripted restart.
    while drivers_of(home) or job_is_running(JobHome(str(home)))[0]:
        time.sleep(0.05)
    return killed, old


def first_batch_after(home: Path, old_pid: int, timeout: float = 300.0) -> float:
    """When a driver other than ``old_pid`` has committed its first batch."""
    from airflow_kafka_stream.storage.jobhome import JobHome

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = JobHome(str(home)).status() or {}
        if status.get("pid") != old_pid and status.get("state") == "RUNNING" and \
                (status.get("batches_this_run") or 0) >= 1:
            return time.time()
        time.sleep(0.1)
    raise SystemExit(f"no batch committed within {timeout:.0f}s after the kill; see {home}")


def scripted(home: Path, kafka: dict) -> float:
    from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher
    from airflow_kafka_stream.ops.submit import LAUNCHED, replay
    from airflow_kafka_stream.ops.watchdog import CAUSE
    from airflow_kafka_stream.storage.jobhome import JobHome

    launcher = AirflowSparkLauncher(str(home), "spark_default", kafka)
    killed, old = kill(home)
    job = JobHome(str(home))
    # replay, not ops.watchdog.watch: a scripted restart is not the watchdog's, so it spends none of the budget
    # the supervised rounds below use.
    started = replay(job, str(job.spec().get("version")), launcher, cause=CAUSE)
    assert started.action == LAUNCHED, started
    return first_batch_after(home, old) - killed


def supervised(home: Path) -> float:
    killed, old = kill(home)
    return first_batch_after(home, old) - killed


def hot_standby_ready(home: Path, timeout: float = 300.0):
    """The job's hot standby once READY (the supervisor launches it)."""
    from airflow_kafka_stream.core.standby import StandbyState
    from airflow_kafka_stream.ops.standby import live_standby
    from airflow_kafka_stream.storage.jobhome import JobHome

    job = JobHome(str(home))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = job.standby_record() or {}
        if record.get("hot") and record.get("state") == StandbyState.READY and live_standby(job) is not None:
            return record
        time.sleep(0.2)
    raise SystemExit(f"no hot standby READY within {timeout:.0f}s; see {home}/logs")


def failover(home: Path) -> float:
    """Kill the job's driver alone (not its hot standby): seconds until the standby committed a batch."""
    from airflow_kafka_stream.storage.jobhome import JobHome
    from airflow_kafka_stream.storage.processes import driver_gone

    standby = hot_standby_ready(home)
    status = JobHome(str(home)).status_document()
    killed = time.time()
    os.killpg(os.getpgid(status.pid), 9)
    while not driver_gone(JobHome(str(home)).status_document()):
        time.sleep(0.05)
    committed = first_batch_after(home, status.pid)
    assert (JobHome(str(home)).status() or {}).get("pid") == standby["pid"], "the hot standby took the job"
    return committed - killed


def wait_deferred(stack, run_id: str, token: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = stack.task_instances("stream_supervisor", run_id, token).get("supervise", {}).get("state")
        if state == "deferred":
            return
        if state in ("failed", "success"):
            raise SystemExit(f"the supervisor ended ({state}) instead of deferring")
        time.sleep(0.5)
    raise SystemExit("the supervisor did not defer")


def failover_rounds(stack, home: Path, topic: str, work: Path) -> list[float]:
    """Stop, submit again with a hot standby (the submit DAG's param), supervise, and time ROUNDS failovers."""
    from airflow_kafka_stream.ops.stop import stop_job
    from airflow_kafka_stream.storage.jobhome import JobHome

    stop_job(JobHome(str(home)), timeout=120, savepoint=False)  # ends the supervision too (stopped on purpose)
    token = stack.token()
    code, run = stack.trigger("stream_submit", {"job_home": str(home), "topics": [topic], "group": "bench-watchdog",
                                                "output_path": str(work / "out"), "app_version": "1",
                                                "hot_standby": True}, token)
    assert code == 200, run
    done = stack.wait_for_run("stream_submit", run["dag_run_id"], token=token)
    assert done["state"] == "success", (done, stack.log_tail("scheduler"))
    code, run = stack.trigger("stream_supervisor", {"job_home": str(home)}, token)
    assert code == 200, run
    took: list[float] = []
    last = 0.0
    for _ in range(ROUNDS):
        hot_standby_ready(home)
        time.sleep(max(0.0, last + BACKOFF_SECONDS + 2 - time.time()))  # the budget's backoff, as above
        took.append(failover(home))
        last = time.time()
    failovers = [r for r in JobHome(str(home)).history() if r["operation"] == "failover"]
    assert len(failovers) == ROUNDS, failovers
    print(f"# without a driver (last heartbeat of the dead one to the take): "
          f"{[r['after']['without_driver_seconds'] for r in failovers]} s", file=sys.stderr)
    return took


def main() -> int:
    from airflow_kafka_stream.devstack.airflow_stack import start_airflow_stack, wait_for_dags
    from airflow_kafka_stream.ops.stop import stop_job
    from airflow_kafka_stream.storage.jobhome import JobHome
    from tests.integration.airflow.test_airflow_submit import kill_drivers
    from tests.kafka_utils import create_topic, unique

    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    topic = create_topic(bootstrap, unique("bench-watchdog"), PARTITIONS)
    kafka = {"bootstrap.servers": bootstrap}
    connections = {"AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "kafka", "extra": kafka}),
                   "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"})}
    os.environ.update(connections)  # the scripted restart launches through the same connections
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(bootstrap, topic, stop), daemon=True)
    feeder.start()
    with tempfile.TemporaryDirectory(prefix="bench-watchdog-") as tmp:
        work = Path(tmp)
        home = work / "home"
        stack = start_airflow_stack(work / "airflow", ROOT / "dags", extra_env=connections)
        try:
            wait_for_dags(stack, ["stream_submit", "stream_supervisor"])
            token = stack.token()
            stack.unpause("stream_submit", token)
            code, run = stack.trigger("stream_submit", {"job_home": str(home), "topics": [topic],
                                                        "group": "bench-watchdog", "output_path": str(work / "out"),
                                                        "app_version": "1"}, token)
            assert code == 200, run
            done = stack.wait_for_run("stream_submit", run["dag_run_id"], token=token)
            assert done["state"] == "success", (done, stack.log_tail("scheduler"))
            restarts = [scripted(home, kafka) for _ in range(ROUNDS)]
            stack.unpause("stream_supervisor", token)
            code, run = stack.trigger("stream_supervisor", {"job_home": str(home)}, token)
            assert code == 200, run
            wait_deferred(stack, run["dag_run_id"], token)
            recoveries: list[float] = []
            last_restart = 0.0
            for _ in range(ROUNDS):
                time.sleep(max(0.0, last_restart + BACKOFF_SECONDS + 2 - time.time()))
                wait_deferred(stack, run["dag_run_id"], stack.token())
                recoveries.append(supervised(home))
                last_restart = time.time()
            history = [r["operation"] for r in JobHome(str(home)).history()]
            assert history.count("watchdog-restart") == ROUNDS, history
            failovers = failover_rounds(stack, home, topic, work)
            print(f"# kill -9 and scripted restart {[round(t, 1) for t in restarts]} s, kill -9 and recovery "
                  f"through the Airflow supervisor {[round(t, 1) for t in recoveries]} s, kill -9 and failover to "
                  f"the hot standby {[round(t, 1) for t in failovers]} s", file=sys.stderr)
            print(f"watchdog_recovery_vs_restart: {statistics.median(recoveries) / statistics.median(restarts):.2f}")
            print(f"failover_vs_restart: {statistics.median(failovers) / statistics.median(restarts):.2f}")
            stop_job(JobHome(str(home)), timeout=120, savepoint=False)
        finally:
            stop.set()
            kill_drivers(home)
            stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
