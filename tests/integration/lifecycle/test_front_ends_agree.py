"""The command line and Airflow are two front-ends of one lifecycle engine: the same steps write the same
history records and reach the same outcome.

Two jobs over two topics fed alike go through submit v1 (twice: the retry finds the driver) → upgrade to v2
through a warm standby → ``kill -9`` of the driver → a watchdog pass that restarts it and one that finds
nothing to do → stop with a savepoint: one from the terminal, one through
the example DAGs (``dag.test()``). Their histories, operation by operation and result by result, are the
same, and both end STOPPED at version 2 with a savepoint and every record written once.

The two jobs read with different sources, the terminal's with Spark's own connector (``format("kafka")``),
Airflow's with this project's ``kafka_stream`` (its default), and the histories agree across front-ends and
sources alike.

The terminal's half is also the command line's lifecycle test: each command's ``--json`` answer, a retried
submit that finds the running driver, a watchdog pass that finds nothing to do, and no secret of
``--command-config`` in a process argument, the job home or the output. (A cold upgrade rolled back is the
same engine's path; the full stack drives it in test_airflow_stack.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.airflow.test_airflow_submit import all_process_arguments, drivers_of, kill_drivers
from tests.integration.airflow.test_airflow_upgrade import Feeder, example_dag, output_ids
from tests.integration.cli_helpers import FAST_UPGRADE, run, wait_running
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2
SECRET = "pw-" + "Lc4Tz"
FAST = {"health_batches": 1, "health_window_seconds": 10, "health_startup_seconds": 180, "stop_timeout_seconds": 60,
        "health_timeout_seconds": 180}


def killed(home: Path) -> None:
    kill_drivers(home)
    deadline = time.monotonic() + 60
    while drivers_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)


def drained(home: Path, bootstrap: str, topic: str) -> None:
    """Wait until the job has read everything the feeder sent, so a stop leaves nothing behind."""
    ends = {p: high for p, (_low, high) in watermarks(bootstrap, topic, PARTITIONS).items()}
    wanted = {topic: {str(p): end for p, end in ends.items()}}
    deadline = time.monotonic() + 120
    while JobHome(str(home)).status().get("last_offsets") != wanted and time.monotonic() < deadline:
        time.sleep(1)


def from_the_terminal(work: Path, bootstrap: str, topic: str, source: str) -> dict:
    home, output = work / "home", work / "out"
    config = work / "client.properties"
    work.mkdir(parents=True)
    config.write_text(f"bootstrap.servers={bootstrap}\nsasl.username=svc-stream\nsasl.password={SECRET}\n")
    job = ("--job-home", str(home), "--command-config", str(config))
    example = ("--topic", topic, "--group", unique("fe-cli"), "--output", str(output), "--master", "local[2]",
               "--source", source)
    code, out, err = run("submit", *job, *example, "--app-version", "1", "--json")
    assert code == 0, err
    submitted = json.loads(out)
    assert submitted["action"] == "launched" and submitted["job"]["state"] == "RUNNING"
    assert SECRET.encode() not in all_process_arguments(), "the secret is in a process's arguments"
    code, out, err = run("submit", *job, *example, "--app-version", "1", "--json", "--no-wait")
    assert (code, json.loads(out)["action"]) == (0, "already-running"), err

    code, out, err = run("upgrade", *job, "--app-version", "2", "--json", *FAST_UPGRADE)
    assert code == 0, err
    upgraded = json.loads(out)
    assert (upgraded["upgraded"], upgraded["version"], upgraded["previous_version"]) == (True, "2", "1")
    before = wait_running(home, "2")
    assert not json.loads((home / "control" / "pins.json").read_text()), "a decided upgrade unpins"

    killed(home)
    code, out, err = run("watchdog", *job, "--json")
    assert code == 0, out + err
    watched = json.loads(out)
    assert watched["action"] == "restart" and watched["restarted"]["action"] == "launched", watched
    restarted = wait_running(home, "2", pid_not=before["pid"])
    assert restarted["generation"] == before["generation"], "a restart resumes the same checkpoint"
    code, out, err = run("watchdog", *job, "--json")
    assert (code, json.loads(out)["action"]) == (0, "nothing"), err

    def stop() -> None:
        code, out, err = run("stop", "--job-home", str(home), "--savepoint", "--json")
        assert code == 0, err
        stopped = json.loads(out)
        assert stopped["state"] == "STOPPED" and stopped["savepoint"]["id"] and stopped["app_version"] == "2"

    return {"home": home, "output": output, "stop": stop}


def from_airflow(work: Path, bootstrap: str, topic: str, source: str, monkeypatch) -> dict:
    home, output = work / "home", work / "out"
    set_connection(monkeypatch, "kafka_default", kafka_connection(bootstrap))
    set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    job = {"job_home": str(home), "topics": [topic], "group": unique("fe-af"), "output_path": str(output)}
    submitted = run_dag("stream_submit", path=example_dag("stream_submit"),
                        conf={**job, "app_version": "1", "source": source})
    assert submitted.tasks == {"submit": "success"}
    again = run_dag("stream_submit", path=example_dag("stream_submit"), conf={**job, "app_version": "1"})
    assert again.xcom("submit", key="submit")["action"] == "already-running", again.xcoms
    # As the command line's: only the new version (the run's form leaves the pipeline settings empty), so it
    # starts with the running version's arguments, its source included.
    upgraded = run_dag("stream_upgrade", path=example_dag("stream_upgrade"),
                       conf={"job_home": str(home), **FAST, "new_version": "2"})
    assert upgraded.tasks["upgrade.outcome"] == "success", upgraded.tasks
    before = wait_running(home, "2")
    killed(home)
    watched = run_dag("stream_watchdog", path=example_dag("stream_watchdog"), conf={"job_home": str(home)})
    assert watched.xcom("watchdog")["action"] == "restart", watched.xcoms
    wait_running(home, "2", pid_not=before["pid"])
    watched = run_dag("stream_watchdog", path=example_dag("stream_watchdog"), conf={"job_home": str(home)})
    assert watched.xcom("watchdog")["action"] == "nothing", watched.xcoms
    return {"home": home, "output": output, "stop": lambda: run_dag(
        "stream_stop", path=example_dag("stream_stop"), conf={"job_home": str(home)})}


def story(home: Path) -> list[tuple[str, str]]:
    """What the history says happened: each operation and its result, in order."""
    return [(r["operation"], r["result"]) for r in JobHome(str(home)).history()]


#: Which source each half reads with. Once, not swapped: the other pairings run elsewhere (Airflow's DAGs on
#: Spark's connector in test_spark_kafka_lifecycle.py, the terminal on this project's source in tests/integration/cli
#: and test_standby.py), and a second run of the whole lifecycle cost the suite four minutes.
SOURCES = {"cli": "kafka", "airflow": "kafka_stream"}


def test_the_terminal_and_airflow_write_the_same_history_and_reach_the_same_outcome(tmp_path, kafka_bootstrap,
                                                                                     airflow_db, monkeypatch):
    sources = SOURCES
    topics = {name: create_topic(kafka_bootstrap, unique(f"fe-{name}"), PARTITIONS) for name in ("cli", "airflow")}
    feeders = {name: Feeder(kafka_bootstrap, topic) for name, topic in topics.items()}
    for feeder in feeders.values():
        feeder.start()
    try:
        jobs = {"cli": from_the_terminal(tmp_path / "cli", kafka_bootstrap, topics["cli"], sources["cli"]),
                "airflow": from_airflow(tmp_path / "airflow", kafka_bootstrap, topics["airflow"], sources["airflow"],
                                        monkeypatch)}
    finally:
        sent = {name: feeder.stop() for name, feeder in feeders.items()}
    for name, job in jobs.items():
        drained(job["home"], kafka_bootstrap, topics[name])
        job["stop"]()

    stories = {name: story(job["home"]) for name, job in jobs.items()}
    assert stories["cli"] == stories["airflow"], json.dumps(stories, indent=1)
    assert ("watchdog-restart", "ok") in stories["cli"] and ("standby-go", "ok") in stories["cli"]
    for name, job in jobs.items():
        home = JobHome(str(job["home"]))
        assert (home.status()["state"], home.spec()["version"]) == ("STOPPED", "2"), name
        for version in ("1", "2"):  # the upgrade and the watchdog's restart kept the job's source
            assert f"--source {sources[name]}" in " ".join(home.submission(version)["application_args"]), name
        assert any((job["home"] / "savepoints").iterdir()), name
        ids = output_ids(job["output"])
        assert len(ids) == len(set(ids)), f"{name}: a record was written twice"
        assert set(ids) == {f"e{i}" for i in range(sent[name])}, f"{name}: a record was lost"
    cli_home = jobs["cli"]["home"]
    for name in ("job.json", "status.json", "history.jsonl"):
        assert SECRET not in (cli_home / name).read_text(), name
    for record in (cli_home / "submissions").iterdir():
        assert SECRET not in record.read_text(), record.name
