"""Run every benchmark against one broker and print their `name: value` lines.

A broker is started once (unless KAFKA_BOOTSTRAP_SERVERS names one) and shared
by the benchmark scripts, which run one after another so they do not compete
for the machine's cores. Pass names to run a subset: `bench/run source position`.
`bench/run --smoke` runs each on its smallest sizes, once (see bench/smoke.py): to see that they still run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ["source", "small_batch", "runtime", "position", "control", "upgrade", "watchdog", "cluster", "savepoint",
           "sink"]


def main(argv: list[str]) -> int:
    smoke = "--smoke" in argv
    chosen = [name for name in argv if name != "--smoke"] or BENCHES
    unknown = [n for n in chosen if n not in BENCHES]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {BENCHES}", file=sys.stderr)
        return 2
    env = dict(os.environ, **({"BENCH_SMOKE": "1"} if smoke else {}))
    broker = None
    if not env.get("KAFKA_BOOTSTRAP_SERVERS"):
        from airflow_kafka_stream.devstack.broker import start_local_broker

        broker = start_local_broker()
        env["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap_servers
    failed = 0
    try:
        for name in chosen:
            script = HERE / f"bench_{name}.py"
            if not script.exists():
                print(f"# {name}: {script.name} missing", file=sys.stderr)
                failed += 1
                continue
            proc = subprocess.run([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
            for line in proc.stdout.splitlines():
                if ": " in line and not line.startswith("#"):
                    print(line, flush=True)
            if proc.returncode != 0:
                print(f"# {name}: exited with {proc.returncode}", file=sys.stderr)
                failed += 1
    finally:
        if broker is not None:
            broker.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
