"""The main job behind `scripts/demo`: the example DAGs, run by Airflow, operate a real streaming job.

Embedded defaults: a local Kafka-protocol broker, Spark in local mode, Airflow
on SQLite under `.demo/airflow`. Airflow runs the example DAGs of `dags/`
(`airflow dags test`: the scheduler loop, the task runner and the triggers in
one process): submit version 1, upgrade to version 2 through `stream_upgrade`
(savepoint, new version, health gate), verify, plan a reset to a point in time
and, after `stream_stop` with a savepoint, execute it. Events are produced
before and between the steps. The summary counts what was produced and what
the pipeline wrote: records lost and duplicated are counted, not assumed.
Airflow's and Spark's own output goes to `.demo/demo.log`. With `--cluster` the
job runs on a Spark standalone cluster on loopback (a master and two workers of
one core) instead of local mode, its executors on this environment packed and
shipped with `--archives`.

With ``--stack`` the same DAG runs go through the full Airflow stack instead
(api-server, scheduler, dag-processor and triggerer on loopback, triggered with
``POST /api/v2/dags/{dag_id}/dagRuns``): the UI's address, user and password
file are printed first, the job page shows the demo's job, and the stack stays
up after the summary until Enter or Ctrl-C when the demo runs in a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.devstack import LOOPBACK_ENV
from airflow_kafka_stream.devstack.demo import PARTITIONS, TOPIC, _events, _produce
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.storage import layout

# Lazy imports: confluent-kafka, pyarrow, the broker, Spark cluster and Airflow stack launchers (pyspark) and
# ops/ are imported after the arguments are parsed, so --help and a bad argument answer at once.

ROOT = Path(__file__).resolve().parents[2]
GROUP = "demo-orders"


class Demo:
    def __init__(self, work: Path, bootstrap: str, master: str = "local[2]", stack=None):
        self.work, self.bootstrap, self.stack = work, bootstrap, stack
        self.home, self.output, self.log = work / "home", work / "output", work / "demo.log"
        self.rows: list[tuple[str, str, str]] = []
        bin_dir = str(Path(sys.executable).parent)
        self.env = dict(
            os.environ,
            PATH=f"{bin_dir}:{os.environ.get('PATH', '')}",
            PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
            AIRFLOW_HOME=str(work / "airflow"), AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__UNIT_TEST_MODE="False",
            AIRFLOW_CONN_KAFKA_DEFAULT=json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}}),
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": master}),
            **LOOPBACK_ENV,
        )
        if master.startswith("spark://"):
            self.env["AIRFLOW__AIRFLOW_KAFKA_STREAM__EXECUTOR_ENVIRONMENT"] = "packed"
        self.job = {"job_home": str(self.home), "topics": [TOPIC], "group": GROUP, "output_path": str(self.output)}

    def airflow(self, *args: str) -> str:
        """Run the airflow command; its output goes to the log, and is returned."""
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"\n===== airflow {' '.join(args)}\n")
        done = subprocess.run([str(Path(sys.executable).with_name("airflow")), *args], env=self.env, cwd=self.work,
                              capture_output=True, text=True)
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(done.stdout + done.stderr)
        return done.stdout + done.stderr

    def connections(self) -> dict[str, str]:
        return {name: self.env[name] for name in ("AIRFLOW_CONN_KAFKA_DEFAULT", "AIRFLOW_CONN_SPARK_DEFAULT")}

    def run(self, dag_id: str, conf: dict) -> bool:
        """One DAG run: `airflow dags test` in-process, or through the stack's REST API."""
        if self.stack is None:
            return "state=success" in self.airflow("dags", "test", dag_id, "--conf", json.dumps(conf))
        token = self.stack.token()
        self.stack.unpause(dag_id, token)
        status, run = self.stack.trigger(dag_id, conf, token)
        if status != 200:
            with open(self.log, "a", encoding="utf-8") as log:
                log.write(f"\n===== POST {dag_id}/dagRuns refused (HTTP {status}): {run}\n")
            return False
        done = self.stack.wait_for_run(dag_id, run["dag_run_id"], timeout=900, token=token)
        tasks = {task_id: ti["state"] for task_id, ti in self.stack.task_instances(dag_id, run["dag_run_id"],
                                                                                   token).items()}
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"\n===== {dag_id} run {run['dag_run_id']}: {done['state']}; tasks {tasks}; task logs under "
                      f"{self.stack.home / 'logs' / f'dag_id={dag_id}'}\n")
        return done["state"] == "success"

    def dag(self, dag_id: str, what: str, **conf) -> bool:
        started = time.monotonic()
        ok = self.run(dag_id, {**self.job, **conf})
        self.rows.append((dag_id, what(ok) if callable(what) else what, f"{'ok' if ok else 'FAILED'} "
                                                                        f"({time.monotonic() - started:.0f}s)"))
        print(f"  {dag_id:<22} {self.rows[-1][1]:<58} {self.rows[-1][2]}", flush=True)
        return ok


def _produced_ids(start: int, count: int) -> set[str]:
    return {f"e{i:06d}" for i in range(start, start + count)}


def _written_ids(output: Path) -> list[str]:
    import pyarrow.dataset as ds

    return [row["id"] for row in ds.dataset(str(output / "events"), format="parquet", partitioning="hive")
            .to_table(columns=["id"]).to_pylist()]


def _wait_caught_up(home, bootstrap: str, timeout: float = 180.0) -> bool:
    from airflow_kafka_stream.kafka.metadata import watermarks

    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        highs = {str(tp.partition): high for tp, (_low, high) in
                 watermarks({"bootstrap.servers": bootstrap}, partitions).items()}
        status = home.status_document()
        if status is not None and status.last_offsets == {TOPIC: highs}:
            return True
        time.sleep(1)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1000, help="events produced before each step")
    parser.add_argument("--workdir", default=".demo")
    parser.add_argument("--stack", action="store_true",
                        help="run the DAGs on the full Airflow stack (REST API, scheduler, triggerer, UI)")
    parser.add_argument("--cluster", action="store_true",
                        help="run the job on a Spark standalone cluster on loopback (two workers of one core)")
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient, NewTopic

    from airflow_kafka_stream.devstack.broker import start_local_broker
    from airflow_kafka_stream.ops import verify
    from airflow_kafka_stream.ops.context import build_context
    from airflow_kafka_stream.storage.jobhome import JobHome

    work = Path(args.workdir).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    broker = start_local_broker()
    cluster = None
    if args.cluster:
        from airflow_kafka_stream.devstack.spark_cluster import start_local_cluster

        cluster = start_local_cluster(workers=2, cores_per_worker=1, worker_memory="1g")
    demo = Demo(work, broker.bootstrap_servers, cluster.master_url if cluster else "local[2]")
    home = JobHome(str(demo.home))
    try:
        if args.stack:
            demo.stack = _start_stack(demo)
        where = f"a standalone cluster at {cluster.master_url} (2 workers x 1 core)" if cluster else "local[2]"
        print(f"airflow-kafka-stream demo: Airflow on SQLite, Spark {where}, Kafka broker at {broker.bootstrap_servers}")
        print(f"  (Airflow's and Spark's output: {demo.log}; drivers' logs: {home.p(*layout.LOGS)})\n", flush=True)
        # Kept alive until its futures resolve; log_level 2 keeps its "disconnected" at the broker's stop off the screen.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 2})
        for future in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
            future.result(30)
        if demo.stack is None:
            demo.airflow("db", "migrate")
        n = args.events
        _produce(broker.bootstrap_servers, _events(n))
        demo.dag("stream_submit", "version 1 submitted: a detached driver, RUNNING", app_version="1")
        _produce(broker.bootstrap_servers, _events(2 * n)[n:])
        demo.dag("stream_upgrade", lambda ok: "version 1 -> 2: rehearsed, savepoint, handover, health" + ("" if ok else
                 " (rolled back)"), new_version="2", health_batches=1, health_window_seconds=10)
        time.sleep(1.5)  # the broker resolves times to the second: the reset point falls between two productions
        reset_to = datetime.now(UTC).replace(microsecond=0)
        time.sleep(1.5)
        _produce(broker.bootstrap_servers, _events(3 * n)[2 * n:])
        caught_up = _wait_caught_up(home, broker.bootstrap_servers)
        demo.dag("stream_verify", "group offsets == checkpoint, per partition")
        at = reset_to.isoformat().replace("+00:00", "Z")
        demo.dag("stream_offset_reset", f"dry run to {at}: nothing changes", strategy="to-datetime", datetime=at)
        demo.dag("stream_stop", "stop after the running batch, with a savepoint")
        written = _written_ids(demo.output)
        produced = _produced_ids(0, 3 * n)
        demo.dag("stream_offset_reset", f"executed to {at}: checkpoint and group", strategy="to-datetime",
                 datetime=at, execute=True)

        spec, status = home.spec(), home.status() or {}
        kept = Path(home.p(*layout.SAVEPOINTS))
        savepoints = sorted(p.name for p in kept.iterdir()) if kept.exists() else []
        report = verify.verify(build_context(job_home=str(demo.home)))
        in_sync = all(p.group_offset == p.checkpoint_offset for p in (v.observation for v in report.partitions))
        reset_record = next((r for r in reversed(home.history()) if r.get("operation") == "reset"), {})
        print()
        print(f"records produced {len(produced)}, consumed {len(set(written))} (rows {len(written)}), "
              f"lost {len(produced - set(written))}, duplicated {len(written) - len(set(written))}"
              + ("" if caught_up else "  (the job had not caught up!)"))
        print(f"version now {spec.get('version')}; job {status.get('state')}; savepoints: {', '.join(savepoints)}")
        print(f"after the reset: {'checkpoint and group at the reset targets on every partition' if in_sync else 'OUT OF SYNC'}"
              f" ({(reset_record.get('after') or {}).get('targets')})")
        failed = [row for row in demo.rows if not row[2].startswith("ok")]
        lost_or_doubled = produced != set(written) or len(written) != len(set(written))
        print("demo: " + ("OK" if not failed and not lost_or_doubled and in_sync else "FAILED") +
              (f" ({len(failed)} DAG run(s) failed; see {demo.log})" if failed else ""))
        if demo.stack is not None:
            _linger(demo.stack)
        return 0 if not failed and not lost_or_doubled and in_sync else 1
    finally:
        from airflow_kafka_stream.kafka.metadata import forget_clients

        if demo.stack is not None:
            demo.stack.stop()
        _stop_drivers(demo.home)
        forget_clients()  # no cached client left to complain about the broker going away
        if cluster is not None:
            cluster.stop()
        broker.stop()


def _start_stack(demo: Demo):
    """The full Airflow stack for the demo, its job home on the job page; prints where the UI is."""
    from airflow_kafka_stream.devstack.airflow_stack import job_defaults_env, start_airflow_stack, wait_for_dags

    print("starting the Airflow stack (api-servers, scheduler, dag-processor, triggerer; about a minute) ...",
          flush=True)
    # Every example DAG's defaults are the demo's job: the scheduled stream_verify checks it, not /tmp/....
    stack = start_airflow_stack(demo.work / "airflow", ROOT / "dags", extra_env={
        **demo.connections(), "AIRFLOW__AIRFLOW_KAFKA_STREAM__JOB_HOMES": str(demo.home),
        **job_defaults_env(demo.job["job_home"], demo.job["topics"], demo.job["group"], demo.job["output_path"])})
    wait_for_dags(stack, ["stream_submit", "stream_upgrade", "stream_verify", "stream_offset_reset", "stream_stop"])
    print(f"Airflow UI: {stack.url}  user {stack.user}, password in {stack.password_file}")
    print(f"  the job page: {stack.url}/plugin/stream-jobs (and the 'Stream job' tab of each example DAG); "
          f"components' logs: {stack.home / 'logs'}\n", flush=True)
    return stack


def _linger(stack) -> None:
    """In a terminal, keep the UI up to look around until Enter or Ctrl-C."""
    if not sys.stdin.isatty():
        return
    print(f"\nthe Airflow UI stays up at {stack.url} (user {stack.user}, password in {stack.password_file}); "
          "press Enter or Ctrl-C to stop it", flush=True)
    try:
        input()
    except (KeyboardInterrupt, EOFError):
        pass


def _stop_drivers(home: Path) -> None:
    """A driver left running (a failed step) is stopped with the demo."""
    from airflow_kafka_stream.storage.jobhome import JobHome

    status = JobHome(str(home)).status_document()
    if status is not None and status.is_live and status.pid is not None:
        try:
            os.kill(status.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StreamError as exc:  # a broker that cannot start, a refused setting: the cause and the fix, no traceback
        print(f"demo: {exc}", file=sys.stderr)
        sys.exit(1)
