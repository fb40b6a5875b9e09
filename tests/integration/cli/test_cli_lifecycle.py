"""The whole lifecycle from a terminal, with real spark-submit drivers and a real broker.

One job, fed continuously: ``submit`` v1 → ``upgrade`` to a v2 that cannot start (rolled back, v1 runs
again) → ``upgrade`` to a working v2 through a warm standby → ``kill -9`` of the driver → ``watchdog``
restarts it → ``stop --savepoint``. Record by record, nothing is lost or duplicated, and no secret of
``--command-config`` reaches a process argument, the job home or the output.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.integration.airflow.test_airflow_submit import all_process_arguments, drivers_of, kill_drivers
from tests.integration.airflow.test_airflow_upgrade import APPS, Feeder, output_ids
from tests.integration.cli_helpers import cli_subprocess
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2
SECRET = "pw-" + "Lc4Tz"
#: Quick gates for a test: a fresh first batch may be slow, after it 10 s of lag not growing is healthy.
FAST_UPGRADE = ("--health-batches", "1", "--health-window", "10", "--health-startup", "90", "--health-timeout",
                "180", "--stop-timeout", "60", "--start-timeout", "300", "--standby-timeout", "300")


def run(*argv: str, timeout: float = 600.0):
    done = cli_subprocess(*argv, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def wait_running(home: Path, version: str, pid_not: int | None = None, timeout: float = 240.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = JobHome(str(home)).status() or {}
        if (status.get("state") == "RUNNING" and JobHome(str(home)).spec().get("version") == version
                and (status.get("batches_this_run") or 0) >= 1 and status.get("pid") != pid_not):
            return status
        time.sleep(1)
    raise AssertionError(f"version {version} is not running with a batch: {JobHome(str(home)).status()}")


def test_submit_upgrade_rollback_watchdog_and_stop_from_the_command_line(tmp_path, kafka_bootstrap):
    topic = create_topic(kafka_bootstrap, unique("cli-life"), PARTITIONS)
    home, output = tmp_path / "home", tmp_path / "out"
    config = tmp_path / "client.properties"
    config.write_text(f"bootstrap.servers={kafka_bootstrap}\nsasl.username=svc-stream\nsasl.password={SECRET}\n")
    job = ("--job-home", str(home), "--command-config", str(config))
    example = ("--topic", topic, "--group", unique("cli-life-group"), "--output", str(output), "--master", "local[2]")
    feeder = Feeder(kafka_bootstrap, topic)
    feeder.start()
    try:
        code, out, err = run("submit", *job, *example, "--app-version", "1", "--json")
        assert code == 0, err
        submitted = json.loads(out)
        assert submitted["action"] == "launched" and submitted["job"]["state"] == "RUNNING"
        assert SECRET.encode() not in all_process_arguments(), "the secret is in a process's arguments"
        code, out, err = run("submit", *job, *example, "--app-version", "1", "--json", "--no-wait")
        assert (code, json.loads(out)["action"]) == (0, "already-running"), err
        v1 = JobHome(str(home)).status()

        # A version that cannot start, cold: the old one stopped with a savepoint, so it is rolled back.
        code, _out, err = run("upgrade", *job, "--app-version", "2", "--no-standby",
                              "--application", str(APPS / "broken_version.py"), *FAST_UPGRADE)
        assert code == 1 and "was rolled back: version 1 runs again" in err, err  # 1: something changed
        rolled_back = wait_running(home, "1", pid_not=v1["pid"])
        assert rolled_back["generation"] == v1["generation"] + 1, "the rollback restored the savepoint"

        # The same program as version 2, through a warm standby: only the version changes.
        code, out, err = run("upgrade", *job, "--app-version", "2", "--json", *FAST_UPGRADE)
        assert code == 0, err
        upgraded = json.loads(out)
        assert (upgraded["upgraded"], upgraded["version"], upgraded["previous_version"]) == (True, "2", "1")
        v2 = wait_running(home, "2")
        operations = [r["operation"] for r in JobHome(str(home)).history()]
        assert "standby-go" in operations and operations.count("restore") == 1
        assert not json.loads((home / "control" / "pins.json").read_text()), "a decided upgrade unpins"

        kill_drivers(home)
        deadline = time.monotonic() + 60
        while drivers_of(home) and time.monotonic() < deadline:
            time.sleep(0.5)
        code, out, err = run("watchdog", *job, "--json")
        assert code == 0, err
        watched = json.loads(out)
        assert watched["action"] == "restart" and watched["restarted"]["action"] == "launched", watched
        restarted = wait_running(home, "2", pid_not=v2["pid"])
        assert restarted["generation"] == v2["generation"], "a restart resumes the same checkpoint"
        code, out, err = run("watchdog", *job, "--json")
        assert (code, json.loads(out)["action"]) == (0, "nothing"), err
    finally:
        sent = feeder.stop()

    ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
    wanted = {topic: {str(p): end for p, end in ends.items()}}
    deadline = time.monotonic() + 120
    while JobHome(str(home)).status().get("last_offsets") != wanted and time.monotonic() < deadline:
        time.sleep(1)
    code, out, err = run("stop", "--job-home", str(home), "--savepoint", "--json")
    assert code == 0, err
    stopped = json.loads(out)
    assert stopped["state"] == "STOPPED" and stopped["savepoint"]["id"] and stopped["app_version"] == "2"

    ids = output_ids(output)
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert set(ids) == {f"e{i}" for i in range(sent)}, "a record was lost"
    for name in ("job.json", "status.json", "history.jsonl"):
        assert SECRET not in (home / name).read_text(), name
    for record in (home / "submissions").iterdir():
        assert SECRET not in record.read_text()
