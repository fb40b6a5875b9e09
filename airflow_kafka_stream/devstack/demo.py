"""The end-to-end demo behind `scripts/demo`.

Starts the embedded broker, produces sample JSON events (and two poison pills),
then operates the example pipeline from a terminal, with the command line alone:
``submit`` version 1 (a detached spark-submit driver), ``upgrade`` to version 2
(a warm standby that rehearses, savepoint, go, health gate), ``verify``, ``stop --savepoint``, a
reset dry run and the ``history``. The summary counts what was produced and what
the pipeline wrote: records lost and duplicated are counted, not assumed.
Every command's output goes to `.demo/demo.log`; everything lives under `.demo/`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_kafka_stream.devstack import LOOPBACK_ENV
from airflow_kafka_stream.errors import StreamError

# Lazy imports: confluent-kafka, pyarrow, the broker (pyspark) and storage.jobhome are imported after the arguments
# are parsed, so --help and a bad argument answer at once.

TOPIC = "demo-events"
GROUP = "demo-pipeline"
PARTITIONS = 3


def _events(count: int) -> list[tuple[bytes, bytes]]:
    start = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    out = []
    for i in range(count):
        key = f"user-{i % 7}"
        event = {"id": f"e{i:06d}", "key": key, "ts": (start + timedelta(seconds=i)).isoformat(),
                 "amount": round(1 + (i % 50) * 0.5, 2)}
        out.append((key.encode(), json.dumps(event).encode()))
    return out


def _produce(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    from confluent_kafka import Producer

    # One record per request keeps the embedded broker's high watermark exact.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 2})
    for key, value in records:
        producer.produce(TOPIC, key=key, value=value)
        producer.poll(0)
    producer.flush(60)


def _wait_consumed(home, expected_total: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        status = home.status() or {}
        document = home.status_document()
        offsets = (document.last_offsets if document else None) or {}
        consumed = sum(int(v) for parts in offsets.values() for v in parts.values()) if offsets else 0
        if consumed >= expected_total:
            return status
        time.sleep(1)
    raise SystemExit(f"the pipeline did not consume {expected_total} records within {timeout}s: {status}")


def _trickle(bootstrap: str, records: list[tuple[bytes, bytes]], per_step: int = 20) -> None:
    for start in range(0, len(records), per_step):
        _produce(bootstrap, records[start:start + per_step])
        time.sleep(0.5)


class Terminal:
    """Runs ``airflow-kafka-stream`` as a person at a terminal would; its output goes to the demo's log."""

    def __init__(self, work: Path, env: dict[str, str]):
        self.log, self.env, self.rows = work / "demo.log", env, []
        self.program = str(Path(sys.executable).with_name("airflow-kafka-stream"))

    def run(self, what: str, *args: str) -> tuple[int, str]:
        started = time.monotonic()
        done = subprocess.run([self.program, *args], env=self.env, capture_output=True, text=True)
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"\n===== airflow-kafka-stream {' '.join(args)}\n{done.stdout}{done.stderr}")
        mark = "ok" if done.returncode == 0 else f"exit {done.returncode} (see {self.log})"
        print(f"  {args[0]:<11} {what:<58} {mark} ({time.monotonic() - started:.0f}s)", flush=True)
        return done.returncode, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--workdir", default=".demo")
    args = parser.parse_args(argv)

    from airflow_kafka_stream.devstack.broker import start_local_broker
    from airflow_kafka_stream.storage.jobhome import JobHome

    work = Path(args.workdir).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    home_dir, output = work / "home", work / "output"
    bin_dir = str(Path(sys.executable).parent)
    # The driver's Spark UI and RPC listen on loopback only (see docs/development.md).
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, **LOOPBACK_ENV)

    with start_local_broker() as broker:
        bootstrap = broker.bootstrap_servers
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})  # must outlive its futures
        for fut in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
            fut.result(30)
        del admin  # else it reports the broker's shutdown under the summary
        records = _events(args.events) + [(b"bad", b"{not json"), (b"bad", b"\x00\x01 binary")]
        _produce(bootstrap, records[: len(records) // 2])
        print(f"airflow-kafka-stream demo from a terminal: Spark local[2], Kafka broker at {bootstrap}\n"
              f"  (every command's output: {work / 'demo.log'}; drivers' logs: {home_dir / 'logs'})\n")
        config = work / "client.properties"  # where a real job's secrets would be: never in arguments
        config.write_text(f"bootstrap.servers={bootstrap}\n")
        job = ("--job-home", str(home_dir), "--command-config", str(config))
        cli = Terminal(work, env)
        code, _ = cli.run("version 1: a detached driver, RUNNING", "submit", *job, "--app-version", "1",
                          "--topic", TOPIC, "--group", GROUP, "--output", str(output), "--master", "local[2]")
        home = JobHome(str(home_dir))
        # The rest arrives while the job is upgraded, 20 records every half second: the new version's health
        # gate sees it consume, and the summary shows that nothing was lost or written twice across the handover.
        feeder = threading.Thread(target=_trickle, args=(bootstrap, records[len(records) // 2:]), daemon=True)
        feeder.start()
        if code == 0:
            code, _ = cli.run("version 1 -> 2: standby rehearsed, savepoint, go, health", "upgrade", *job,
                              "--app-version", "2", "--health-batches", "1", "--health-window", "5")
        feeder.join()
        if code == 0:
            _wait_consumed(home, len(records), 600)
        results = [code]
        for what, command in (("group offsets == checkpoint, per partition", ("verify",)),
                              ("stop after the running batch, with a savepoint", ("stop", "--savepoint")),
                              ("dry run to earliest: nothing changes", ("reset", "--to-earliest")),
                              ("who did what, when", ("history",))):
            extra = ("--command-config", str(config)) if command[0] in ("verify", "reset") else ()
            results.append(cli.run(what, *command, "--job-home", str(home_dir), *extra)[0])
        stopped = home.status() or {}

        import pyarrow.dataset as ds

        ids = ([row["id"] for row in ds.dataset(str(output / "events"), format="parquet", partitioning="hive")
                .to_table(columns=["id"]).to_pylist()] if (output / "events").exists() else [])
        lost, duplicated = args.events - len(set(ids)), len(ids) - len(set(ids))
        print(f"\nrecords produced {len(records)} ({args.events} events, 2 poison pills), events written "
              f"{len(ids)}, lost {lost}, duplicated {duplicated}")
        print(f"version now {home.spec().get('version')}; job {stopped.get('state')}; savepoints: "
              f"{', '.join(sorted(p.name for p in (home_dir / 'savepoints').iterdir())) if (home_dir / 'savepoints').exists() else 'none'}")
        ok = not any(results) and lost == 0 and duplicated == 0 and stopped.get("state") == "STOPPED"
        print("demo: OK" if ok else "demo: FAILED")
        return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StreamError as exc:  # a broker that cannot start, a refused setting: the cause and the fix, no traceback
        print(f"demo: {exc}", file=sys.stderr)
        sys.exit(1)
