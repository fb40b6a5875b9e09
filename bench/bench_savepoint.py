"""What live savepoints cost a running job: ``live_savepoint_batch_slowdown``.

One stateful example pipeline (``--totals``, a running amount and count over 2000 keys in Spark's state
store, ``BENCH_SAVEPOINT_STORE``: hdfs by default, or rocksdb) runs under a continuous feed. Phases of
``BENCH_SAVEPOINT_PHASE_SECONDS`` alternate: in one nothing else happens, in the other live savepoints are
taken back to back (``ops.savepoints.create``, what ``savepoint create`` runs). A batch's duration is the
time from Spark writing ``offsets/N`` (the batch planned) to ``commits/N`` (the batch done), read from the
checkpoint files' modification times, for the batches that started and ended inside a phase. The figure
is the median batch duration with savepoints over the median without them (bar: at most 1.1).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from smoke import SMOKE, count, sized

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PHASE_SECONDS = sized("BENCH_SAVEPOINT_PHASE_SECONDS", 25, 4)
ROUNDS = count("BENCH_SAVEPOINT_ROUNDS", 3, 1)
#: Batches the pipeline runs before the first phase (its first ones are slower).
SETTLE_BATCHES = count(None, 20, 2)
STORE = os.environ.get("BENCH_SAVEPOINT_STORE", "hdfs")
KEYS = 2000


def feed(bootstrap: str, topic: str, stop: threading.Event) -> None:
    from tests.kafka_utils import produce

    i = 0
    while not stop.is_set():
        produce(bootstrap, topic, [(f"k{n % KEYS}", json.dumps({"id": f"e{n}", "key": f"k{n % KEYS}", "amount": n}))
                                   for n in range(i, i + 50)])
        i += 50
        stop.wait(0.2)


def batch_durations(checkpoint: Path, start: float, end: float) -> list[float]:
    """Seconds from offsets/N to commits/N for the batches planned and committed within [start, end]."""
    found = []
    for commit in (checkpoint / "commits").iterdir():
        if not commit.name.isdigit():
            continue
        try:
            planned = (checkpoint / "offsets" / commit.name).stat().st_mtime
            done = commit.stat().st_mtime
        except FileNotFoundError:
            continue
        if start <= planned and done <= end:
            found.append(done - planned)
    return found


def savepoints_back_to_back(home: str, until: float, seconds: list[float] | None = None) -> int:
    """Live savepoints one after the other until ``until``; each one's duration goes to ``seconds``."""
    from airflow_kafka_stream.ops import savepoints
    from airflow_kafka_stream.storage.jobhome import JobHome

    taken = 0
    while time.time() < until:
        started = time.monotonic()
        savepoints.create(JobHome(home))
        if seconds is not None:
            seconds.append(time.monotonic() - started)
        taken += 1
    return taken


def wait_running(home: str, proc: subprocess.Popen, batches: int, timeout: float = 300.0) -> None:
    from airflow_kafka_stream.storage.jobhome import JobHome

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = JobHome(home).status() or {}
        if status.get("state") == "RUNNING" and (status.get("batches_this_run") or 0) >= batches:
            return
        if proc.poll() is not None:
            raise SystemExit(f"the pipeline exited with {proc.returncode}")
        time.sleep(0.5)
    raise SystemExit("the pipeline never ran")


def main() -> int:
    from airflow_kafka_stream.storage.jobhome import JobHome
    from tests.kafka_utils import create_topic, unique

    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    topic = create_topic(bootstrap, unique("bench-savepoint"), 2)
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(bootstrap, topic, stop), daemon=True)
    feeder.start()
    with tempfile.TemporaryDirectory(prefix="bench-savepoint-") as tmp:
        home = f"{tmp}/home"
        log = open(f"{tmp}/driver.log", "wb")  # noqa: SIM115 - lives with the driver
        proc = subprocess.Popen(
            [sys.executable, "-m", "airflow_kafka_stream.jobs.example_pipeline", "--home", home, "--bootstrap",
             bootstrap, "--topic", topic, "--group", "bench-savepoint", "--output", f"{tmp}/out", "--totals",
             "--state-store", STORE, "--heartbeat-seconds", "2"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_running(home, proc, batches=SETTLE_BATCHES)
            checkpoint = Path(JobHome(home).checkpoint_url())
            durations: dict[str, list[float]] = {"bare": [], "live": []}
            ratios, taken, took = [], 0, []
            for _ in range(ROUNDS):
                medians = {}
                for phase in ("bare", "live"):
                    start = time.time()
                    if phase == "live":
                        taken += savepoints_back_to_back(home, start + PHASE_SECONDS, took)
                    else:
                        time.sleep(PHASE_SECONDS)
                    found = batch_durations(checkpoint, start, time.time())
                    while SMOKE and not found and time.time() < start + 300:  # a short phase on a busy machine
                        if phase == "live":
                            taken += savepoints_back_to_back(home, time.time() + 1)
                        else:
                            time.sleep(1)
                        found = batch_durations(checkpoint, start, time.time())
                    durations[phase] += found
                    medians[phase] = statistics.median(found)
                    shutil.rmtree(f"{home}/savepoints", ignore_errors=True)  # outside the measured phases
                ratios.append(medians["live"] / medians["bare"])
            bare, live = statistics.median(durations["bare"]), statistics.median(durations["live"])
            print(f"# {STORE} state, {ROUNDS} rounds of {PHASE_SECONDS:.0f} s phases: {len(durations['bare'])} "
                  f"batches without savepoints (median {bare * 1000:.0f} ms), {len(durations['live'])} with "
                  f"{taken} live savepoints taken back to back (median {live * 1000:.0f} ms; a savepoint took "
                  f"{statistics.median(took or [0.0]):.2f} s, median); per-round ratios {[round(r, 3) for r in ratios]}",
                  file=sys.stderr)
            print(f"live_savepoint_batch_slowdown: {live / bare:.3f}")
        finally:
            stop.set()
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            feeder.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
