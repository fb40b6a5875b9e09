"""A Spark standalone cluster on loopback: one master and workers, started with pyspark's own launcher.

For the tests and ``scripts/demo --cluster``: the same deploy classes a real
standalone cluster runs (``spark-class org.apache.spark.deploy.master.Master``
and ``...worker.Worker``), each worker with its own small core and memory
share, so a job submitted to ``spark://127.0.0.1:PORT`` runs its executors in
processes of their own, as it would on other machines. Each daemon runs in its
own session so :meth:`LocalSparkCluster.stop` ends it with everything it
started (executors and their Python workers).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from airflow_kafka_stream.devstack.broker import free_port
from airflow_kafka_stream.errors import StreamError

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package (its bin/ has spark-class)."""
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise StreamError(f"{home}/bin/spark-class is missing: the standalone cluster needs the full pyspark "
                          "package (pip install pyspark), not pyspark-client alone")
    return home


@dataclass
class LocalSparkCluster:
    """A running master and its workers; use as a context manager or call :meth:`stop`."""

    master_port: int
    web_port: int
    workdir: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def worker_dirs(self) -> list[Path]:
        """Each worker's work directory: ``<app id>/<executor id>/stderr`` holds an executor's log."""
        return sorted(self.workdir.glob("worker-*/work"))

    def executor_logs(self, app_id: str | None = None) -> list[Path]:
        """The stderr files of the executors of ``app_id`` (all applications when None)."""
        pattern = f"{app_id or '*'}/*/stderr"
        return sorted(p for d in self.worker_dirs for p in d.glob(pattern))

    def state(self) -> dict:
        """The master's JSON view (workers, their cores, running and completed applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=5) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        """End every daemon's session (workers with their executors, the master) at once; remove the work directory."""
        _end_sessions(self.processes)
        self.processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalSparkCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_cluster(workers: int = 2, cores_per_worker: int = 1, worker_memory: str = "1g",
                        timeout: float = 90.0) -> LocalSparkCluster:
    """Start a master and ``workers`` workers on 127.0.0.1 and wait until all have registered."""
    home = spark_home()
    workdir = Path(tempfile.mkdtemp(prefix="aks-standalone-"))
    cluster = LocalSparkCluster(free_port(), free_port(), workdir)
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost",
           "SPARK_DAEMON_MEMORY": "256m", "SPARK_NO_DAEMONIZE": "1"}
    try:
        cluster.processes.append(_daemon(home, env, workdir / "master.log", [
            MASTER_CLASS, "--host", "127.0.0.1", "--port", str(cluster.master_port),
            "--webui-port", str(cluster.web_port)]))
        _wait(cluster, lambda state: state.get("status") == "ALIVE", timeout, "the master to start")
        for index in range(workers):
            work = workdir / f"worker-{index}" / "work"
            work.mkdir(parents=True)
            cluster.processes.append(_daemon(home, env, workdir / f"worker-{index}" / "worker.log", [
                WORKER_CLASS, "--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()),
                "--cores", str(cores_per_worker), "--memory", worker_memory, "--work-dir", str(work),
                cluster.master_url]))
        _wait(cluster, lambda state: sum(w.get("state") == "ALIVE" for w in state.get("workers", [])) >= workers,
              timeout, f"{workers} worker(s) to register")
    except BaseException:
        cluster.stop()
        raise
    log.info("Spark standalone cluster up at %s (%d workers of %d core(s))", cluster.master_url, workers,
             cores_per_worker)
    return cluster


def _daemon(home: Path, env: dict[str, str], log_path: Path, args: list[str]) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as out:
        return subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=log_path.parent, start_new_session=True)


def _wait(cluster: LocalSparkCluster, ready, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in cluster.processes:
            if process.poll() is not None:
                raise StreamError(f"a Spark daemon exited with code {process.returncode} while waiting for {what}; "
                                  f"see the logs under {cluster.workdir}")
        try:
            if ready(cluster.state()):
                return
        except OSError:
            pass  # the web UI is not up yet
        time.sleep(0.5)
    raise StreamError(f"timed out after {timeout:.0f}s waiting for {what}; see the logs under {cluster.workdir}")


def _end_sessions(processes: list[subprocess.Popen], grace: float = 15.0) -> None:
    """SIGTERM each daemon's whole session (executors and Python workers too), SIGKILL what outlives the grace."""
    _signal_sessions(processes, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    _signal_sessions(processes, signal.SIGKILL)  # what outlived the grace, and children that outlived their daemon
    for process in processes:
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            log.warning("Spark daemon %d did not exit after SIGKILL", process.pid)


def _signal_sessions(processes: list[subprocess.Popen], sig: signal.Signals) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


if __name__ == "__main__":  # pragma: no cover - a manual check: python -m airflow_kafka_stream.devstack.spark_cluster
    logging.basicConfig(level=logging.INFO)
    with start_local_cluster() as running:
        print(running.master_url, flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
