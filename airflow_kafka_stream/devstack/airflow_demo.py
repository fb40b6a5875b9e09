"""The main job behind `scripts/demo`: the example DAGs, run by Airflow, operate a real streaming job.

Embedded defaults: a local Kafka-protocol broker, Spark in local mode, Airflow
on SQLite under `.demo/airflow`. Airflow runs the example DAGs of `dags/`
(`airflow dags test`: the scheduler loop, the task runner and the triggers in
one process): submit version 1, upgrade to version 2 through `stream_upgrade`
(savepoint, new version, health gate), verify, plan a reset to a point in time
and, after `stream_stop` with a savepoint, execute it. Events are produced
before and between the steps. The summary counts what was produced and what
the pipeline wrote: records lost and duplicated are counted, not assumed.
Airflow's and Spark's own output goes to `.demo/demo.log`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from airflow_kafka_stream.devstack.demo import PARTITIONS, TOPIC, _events, _produce

ROOT = Path(__file__).resolve().parents[2]
GROUP = "demo-orders"


class Demo:
    def __init__(self, work: Path, bootstrap: str):
        self.work, self.bootstrap = work, bootstrap
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
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        )
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

    def dag(self, dag_id: str, what: str, **conf) -> bool:
        started = time.monotonic()
        out = self.airflow("dags", "test", dag_id, "--conf", json.dumps({**self.job, **conf}))
        ok = "state=success" in out
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
    from airflow_kafka_stream.core.offsets import TopicPartition
    from airflow_kafka_stream.kafka.metadata import watermarks

    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        highs = {str(tp.partition): high for tp, (_low, high) in
                 watermarks({"bootstrap.servers": bootstrap}, partitions).items()}
        if (home.status() or {}).get("last_offsets") == {TOPIC: highs}:
            return True
        time.sleep(1)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1000, help="events produced before each step")
    parser.add_argument("--workdir", default=".demo")
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
    demo = Demo(work, broker.bootstrap_servers)
    home = JobHome(str(demo.home))
    try:
        print(f"airflow-kafka-stream demo: Airflow on SQLite, Spark local[2], Kafka broker at {broker.bootstrap_servers}")
        print(f"  (Airflow's and Spark's output: {demo.log}; drivers' logs: {demo.home}/logs)\n", flush=True)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # kept alive until its futures resolve
        for future in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
            future.result(30)
        demo.airflow("db", "migrate")
        n = args.events
        _produce(broker.bootstrap_servers, _events(n))
        demo.dag("stream_submit", "version 1 submitted: a detached driver, RUNNING", app_version="1")
        _produce(broker.bootstrap_servers, _events(2 * n)[n:])
        demo.dag("stream_upgrade", lambda ok: "version 1 -> 2: savepoint, start, health gate" + ("" if ok else
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
        savepoints = sorted(p.name for p in (demo.home / "savepoints").iterdir()) if (
            demo.home / "savepoints").exists() else []
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
        return 0 if not failed and not lost_or_doubled and in_sync else 1
    finally:
        from airflow_kafka_stream.kafka.metadata import forget_clients

        _stop_drivers(demo.home)
        forget_clients()  # no cached client left to complain about the broker going away
        broker.stop()


def _stop_drivers(home: Path) -> None:
    """A driver left running (a failed step) is stopped with the demo."""
    import signal

    from airflow_kafka_stream.storage.jobhome import JobHome

    status = JobHome(str(home)).status() or {}
    if status.get("state") in ("STARTING", "RUNNING", "DRAINING") and isinstance(status.get("pid"), int):
        try:
            os.kill(status["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    sys.exit(main())
