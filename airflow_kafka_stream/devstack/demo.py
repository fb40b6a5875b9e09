"""The end-to-end demo behind `scripts/demo`.

Starts the embedded broker, produces sample JSON events (and two poison pills),
runs the example pipeline as a separate Spark driver process under the job
runtime, waits until it has consumed everything, prints what was consumed and
the checkpoint's position, verifies the group against the checkpoint, then
stops the job gracefully with a savepoint. Everything lives under `.demo/`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_kafka_stream.devstack import LOOPBACK_ENV

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
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0, "log_level": 2})
    for key, value in records:
        producer.produce(TOPIC, key=key, value=value)
        producer.poll(0)
    producer.flush(60)


def _wait_consumed(home, expected_total: int, timeout: float, proc: subprocess.Popen) -> dict:
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the pipeline exited early with code {proc.returncode}; see its log above")
        status = home.status() or {}
        document = home.status_document()
        offsets = (document.last_offsets if document else None) or {}
        consumed = sum(int(v) for parts in offsets.values() for v in parts.values()) if offsets else 0
        if consumed >= expected_total:
            return status
        time.sleep(1)
    raise SystemExit(f"the pipeline did not consume {expected_total} records within {timeout}s: {status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--workdir", default=".demo")
    args = parser.parse_args(argv)

    from airflow_kafka_stream.devstack.broker import start_local_broker
    from airflow_kafka_stream.ops import inspect, reset, stop, verify
    from airflow_kafka_stream.ops.context import build_context
    from airflow_kafka_stream.render.checkpoint import position_text, verify_text
    from airflow_kafka_stream.render.job import stop_text
    from airflow_kafka_stream.render.reset import plan_text
    from airflow_kafka_stream.storage.jobhome import JobHome

    work = Path(args.workdir).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    home_dir, output = work / "home", work / "output"
    # The driver's Spark UI and RPC listen on loopback only (see docs/development.md).
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **LOOPBACK_ENV)

    with start_local_broker() as broker:
        bootstrap = broker.bootstrap_servers
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
        for fut in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
            fut.result(30)
        records = _events(args.events) + [(b"bad", b"{not json"), (b"bad", b"\x00\x01 binary")]
        _produce(bootstrap, records)
        print(f"== broker {bootstrap}: produced {len(records)} records ({args.events} events, 2 poison pills) "
              f"to {TOPIC} ({PARTITIONS} partitions)")

        cmd = [sys.executable, "-m", "airflow_kafka_stream.jobs.example_pipeline", "--home", str(home_dir),
               "--bootstrap", bootstrap, "--topic", TOPIC, "--group", GROUP, "--output", str(output),
               "--starting-offsets", "earliest", "--job-name", "demo", "--max-offsets-per-trigger", "500",
               "--trigger-interval", "1 second", "--app-version", "demo-1"]
        print("== starting the example pipeline:", " ".join(cmd[1:4]), "...")
        proc = subprocess.Popen(cmd, env=env)
        try:
            home = JobHome(str(home_dir))
            status = _wait_consumed(home, len(records), 600, proc)
            print(f"== consumed everything: batch {status.get('last_batch_id')}, "
                  f"dead letters {status.get('dead_letters')}")

            ctx = build_context(job_home=str(home_dir), bootstrap_servers=bootstrap, group=GROUP)
            print("\n== checkpoint position")
            print(position_text(inspect.position(ctx)))
            print("\n== verify group offsets against the checkpoint")
            print(verify_text(verify.verify(ctx, stall_threshold="PT10M")))

            print("\n== graceful stop with savepoint")
            result = stop.stop_job(home, timeout=120, savepoint=True, app_version="demo-1")
            print(stop_text(result))
            code = proc.wait(120)
            print(f"== pipeline exited with code {code}")

            print("\n== what a reset to earliest would do (dry run, nothing changes)")
            request = reset.ResetRequest("to-earliest")
            print(plan_text(reset.plan(ctx, request)))
            print("\n== the job's history")
            for record in home.history():
                print(f"{record['started_at'][:19]}  {record['operation']:<16} {record['result']}")
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(60)

        import pyarrow.parquet as pq

        rows = pq.read_table(str(output / "events")).num_rows if (output / "events").exists() else 0
        print(f"\n== sink: {rows} event rows in {output}/events (expected {args.events})")
        return 0 if code == 0 and rows == args.events else 1


if __name__ == "__main__":
    sys.exit(main())
