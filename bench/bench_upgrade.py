"""Downtime of an upgrade against a crash: ``upgrade_downtime_vs_restart`` and
``standby_upgrade_downtime_vs_restart``, with the parts of the standby's downtime and ``rehearsal_seconds``.

One example-pipeline job, fed continuously, is taken down and brought back in three ways, alternating:

* upgrade (cold): request a stop after the running batch, wait for STOPPED, take a savepoint, start the next
  version's driver on the checkpoint, wait for its first committed batch;
* standby upgrade: the command line's upgrade (``ops.upgrade.upgrade``): the next version's driver starts as a
  warm standby and rehearses its query on a copy of the job's state until READY (not downtime: the old
  version still runs; ``rehearsal_seconds``); then the stop with its savepoint, the go, the standby's first
  committed batch, and a short health gate;
* crash: ``kill -9`` the driver and start it again on the same checkpoint (it waits until the dead driver's
  heartbeat is stale, as any restart must), wait for its first committed batch.

Each figure is the median time from the stop request (or the kill) to the new driver's first committed
batch (the mtime of its ``commits/N``); the ratios are upgrade / crash and standby upgrade / crash. The
standby's downtime is split into parts that add up to it, from the job home's records (``handover_parts``):
drain (stop request → the old driver STOPPED), savepoint (→ the stop operation done: noticing STOPPED, the
copy), go (→ the standby saw its go: the pin, the go's write, the standby's poll), take (→ the job taken:
lock, generation, job.json, first status), query start (→ the query started), first batch (→ its commit;
planned: its ``offsets/N`` written, which includes the new query's source process starting).
Drivers beat every 2 s: at 1 s, a loaded machine makes a driver fence itself (two silent intervals).
``BENCH_UPGRADE_PATHS=standby`` measures one path alone; ``BENCH_UPGRADE_KEEP=1`` keeps the logs and job home.

``BENCH_UPGRADE_SOURCE=kafka`` runs the job on Spark's own connector (the example pipeline's ``--source kafka``),
the same three paths (its standby cannot start its query ahead of the go, see docs/standby.md): the figures are
``spark_kafka_upgrade_downtime_vs_restart``, ``spark_kafka_standby_upgrade_downtime_vs_restart`` and each path's
median in seconds.
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

from smoke import count

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The standby's downtime, in order: they add up to it (see handover_parts).
PARTS = ("drain", "savepoint", "go", "take", "query_start", "first_batch")
ROUNDS = count("BENCH_UPGRADE_ROUNDS", 2, 1)
PARTITIONS = 2
#: The paths measured (all three for the ratios; one alone while working on it).
SOURCE = os.environ.get("BENCH_UPGRADE_SOURCE", "kafka_stream")
KINDS = os.environ.get("BENCH_UPGRADE_PATHS", "upgrade,standby,crash").split(",")
#: The figures' prefix: none for this project's source, ``spark_kafka_`` for Spark's connector.
PREFIX = "" if SOURCE == "kafka_stream" else "spark_kafka_"


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
                "--trigger-interval", "1 second", "--source", SOURCE]
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
                return first_commit_time(home)  # when Spark committed it, not when this look saw it
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


def standby_upgrade(job: Job, parts: list[dict[str, float]]) -> float:
    """The command line's upgrade (``ops.upgrade.upgrade``) through a standby; its parts go to ``parts``."""
    from airflow_kafka_stream.ops.launcher import LaunchedDriver, Submission
    from airflow_kafka_stream.ops.upgrade import UpgradeOptions, upgrade
    from airflow_kafka_stream.storage.jobhome import JobHome

    home, old = JobHome(str(job.home)), job.proc

    class DirectLauncher:
        def launch(self, submission: Submission, log: str, extra_env=None) -> LaunchedDriver:
            job.start(dict(extra_env or {}))
            return LaunchedDriver(job.proc.pid, socket.gethostname(), log)

    began = time.time()
    options = UpgradeOptions(health_batches=1, health_window_seconds=10.0, health_startup_seconds=120.0,
                             health_timeout_seconds=180.0, standby_ready_timeout_seconds=600.0)
    upgrade(home, Submission(str(job.version + 1)), DirectLauncher(), {"bootstrap.servers": job.bootstrap}, options,
            say=lambda step: print(f"# {time.time():.2f} upgrade: {step}", file=sys.stderr, flush=True))
    old.wait(60)
    found = handover_parts(home, began)
    parts.append(found)
    return found["downtime"]


def _epoch(text: str | None) -> float:
    from datetime import datetime

    if not text:
        raise SystemExit("a timestamp the parts need is missing from the job home's records")
    return datetime.fromisoformat(text).timestamp()


def handover_parts(home, began: float) -> dict[str, float]:
    """The parts of one standby upgrade's downtime, from the job home's records (history, the standby's record,
    the checkpoint): each ends where the next begins, so they add up to the downtime."""
    records = [r for r in home.history() if _epoch(r.get("started_at")) >= began]

    def last(name: str) -> dict:
        found = [r for r in records if r.get("operation") == name and r.get("result") == "ok"]
        if not found:
            raise SystemExit(f"no {name} record in the history since the upgrade began")
        return found[-1]

    request, stop, go = last("stop-request"), last("stop"), last("standby-go")
    standby = home.standby_record() or {}
    marks = {
        "request": _epoch(request["started_at"]),
        "stopped": _epoch((stop.get("before") or {}).get("stopped_at")),
        "saved": _epoch(stop["finished_at"]),
        "go_written": _epoch(go["finished_at"]),
        "go_seen": _epoch(standby.get("go_seen_at")),
        "taken": _epoch(standby.get("ended_at")),
        "query_started": _epoch(standby.get("query_started_at")),
        "first_batch": first_commit_time(home),
    }
    parts = {"drain": marks["stopped"] - marks["request"],
             "savepoint": marks["saved"] - marks["stopped"],
             "go": marks["go_seen"] - marks["saved"],
             "take": marks["taken"] - marks["go_seen"],
             "query_start": marks["query_started"] - marks["taken"],
             "first_batch": marks["first_batch"] - marks["query_started"],
             "downtime": marks["first_batch"] - marks["request"],
             # inside the parts above: the stop's look noticing STOPPED, its savepoint copy, the go's own write
             "stop_noticed": _epoch(stop["started_at"]) - marks["stopped"],
             "go_write": marks["go_written"] - _epoch(go["started_at"]),
             "go_poll": marks["go_seen"] - marks["go_written"],
             **batch_steps(home, marks),
             "rehearsal": float((standby.get("rehearsal") or {}).get("seconds") or float("nan"))}
    return parts


def batch_steps(home, marks: dict[str, float]) -> dict[str, float]:
    """Inside the drain and the first batch, from the checkpoint's file times: the new version's first batch
    planned (``offsets/N`` written) and run (``commits/N``); the old version's last batch; a usual batch."""
    checkpoint = home.checkpoint_url()
    status = home.status() or {}
    first = int(status["last_batch_id"]) - int(status["batches_this_run"]) + 1

    def when(kind: str, batch: int) -> float:
        return os.path.getmtime(os.path.join(checkpoint, kind, str(batch)))

    usual = [when("commits", b) - when("offsets", b) for b in range(max(0, first - 6), first - 1)]
    return {"first_planned": when("offsets", first) - marks["query_started"],
            "first_ran": when("commits", first) - when("offsets", first),
            "old_last_planned": when("offsets", first - 1) - marks["request"],
            "old_last_committed": when("commits", first - 1) - marks["request"],
            "usual_batch": statistics.median(usual) if usual else float("nan")}


def first_commit_time(home) -> float:
    """When the running driver's first batch of its run was committed: the mtime of its ``commits/N``."""
    status = home.status() or {}
    first = int(status["last_batch_id"]) - int(status["batches_this_run"]) + 1
    return os.path.getmtime(os.path.join(home.checkpoint_url(), "commits", str(first)))


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
        if os.environ.get("BENCH_UPGRADE_KEEP"):  # the drivers' logs and the job home, to look into afterwards
            tmp = tempfile.mkdtemp(prefix="bench-upgrade-kept-")
            print(f"# keeping {tmp}", file=sys.stderr)
        job = Job(Path(tmp), bootstrap, topic)
        try:
            job.first_batch_after(job.start())
            parts: list[dict[str, float]] = []
            paths = {"upgrade": upgrade, "standby": lambda job: standby_upgrade(job, parts), "crash": crash}
            times: dict[str, list[float]] = {kind: [] for kind in paths}
            kinds = [kind for kind in paths if kind in KINDS]
            for round_ in range(ROUNDS):
                for kind in kinds[round_ % len(kinds):] + kinds[:round_ % len(kinds)]:  # each path in each position in turn
                    times[kind].append(paths[kind](job))
            print("# " + ", ".join(f"{kind} {[round(t, 2) for t in times[kind]]} s" for kind in kinds), file=sys.stderr)
            medians = {kind: statistics.median(times[kind]) for kind in kinds}
            if "crash" in medians:
                for kind, name in (("upgrade", "upgrade"), ("standby", "standby_upgrade")):
                    if kind in medians:
                        print(f"{PREFIX}{name}_downtime_vs_restart: {medians[kind] / medians['crash']:.2f}")
            if PREFIX:
                for kind, name in (("upgrade", "upgrade"), ("standby", "standby_upgrade"), ("crash", "restart")):
                    if kind in medians:
                        print(f"{PREFIX}{name}_downtime_seconds: {medians[kind]:.2f}")
            for found in parts:
                print("# standby upgrade parts (s): " + ", ".join(f"{k} {v:.2f}" for k, v in found.items()),
                      file=sys.stderr)
            if parts:
                for name in PARTS:
                    print(f"standby_downtime_{name}_seconds: {statistics.median(p[name] for p in parts):.2f}")
                print(f"rehearsal_seconds: {statistics.median(p['rehearsal'] for p in parts):.1f}")
        except BaseException:
            for log in sorted(Path(tmp).glob("driver-*.log")):  # what went wrong, before the folder goes
                print(f"# --- end of {log.name} ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:]),
                      file=sys.stderr)
            raise
        finally:
            stop.set()
            for proc in job.procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
