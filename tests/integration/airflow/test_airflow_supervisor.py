"""Event-driven recovery on the full Airflow stack (api-server, scheduler, dag-processor, triggerer).

``stream_supervisor`` is triggered once through the REST API and waits deferred in the triggerer. A ``kill -9``
of the driver, with nothing triggered by hand, has the job running again within seconds, nothing lost or
duplicated; a job stopped with ``stream_stop`` is not restarted (the supervision ends); a job that keeps dying
is restarted up to the failure-rate limit, then given up on, loudly.
"""

from __future__ import annotations

import json
import time

import pytest

from airflow_kafka_stream.ops.inspect import job_status
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.conftest import ROOT
from tests.integration.airflow.test_airflow_submit import drivers_of, kill_drivers
from tests.integration.airflow.test_airflow_upgrade import Feeder, output_ids
from tests.integration.airflow.test_airflow_watchdog import wait_for
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PARTITIONS = 2
#: The bench's bar is 1.5 x a scripted restart (a driver start, 20-60 s on two shared cores): with margin.
RECOVERY_BOUND_SECONDS = 150


@pytest.fixture(scope="module")
def stack(kafka_bootstrap, tmp_path_factory):
    from airflow_kafka_stream.devstack.airflow_stack import start_airflow_stack, wait_for_dags

    extra = {"AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "kafka", "extra": {
                 "bootstrap.servers": kafka_bootstrap}}),
             "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
             # One restart allowed: the second crash is the crash loop given up on.
             "STREAM_SUPERVISOR_MAX_RESTARTS": "1"}
    started = start_airflow_stack(tmp_path_factory.mktemp("supervisor-stack"), ROOT / "dags", extra_env=extra)
    try:
        wait_for_dags(started, ["stream_submit", "stream_stop", "stream_supervisor"])
        yield started
    finally:
        started.stop()


def run(stack, dag_id: str, conf: dict, token: str, wait: bool = True) -> dict:
    stack.unpause(dag_id, token)
    code, body = stack.trigger(dag_id, conf, token)
    assert code == 200, body
    return stack.wait_for_run(dag_id, body["dag_run_id"], token=token) if wait else body


def supervisor_state(stack, run_id: str, token: str) -> str | None:
    return stack.task_instances("stream_supervisor", run_id, token).get("supervise", {}).get("state")


def kill(home) -> float:
    killed = time.time()
    kill_drivers(home)
    return killed


def operations(home) -> list[str]:
    return [r["operation"] for r in JobHome(str(home)).history()]


def test_a_killed_driver_is_restarted_by_the_supervisor_a_stopped_job_is_not_and_a_crash_loop_is_given_up(
        stack, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("af-supervise"), PARTITIONS)
    home, output = tmp_path / "home", tmp_path / "out"
    job = {"job_home": str(home), "topics": [topic], "group": unique("af-supervise-group"),
           "output_path": str(output)}
    status = lambda: JobHome(str(home)).status() or {}  # noqa: E731
    token = stack.token()
    feeder = Feeder(kafka_bootstrap, topic)
    feeder.start()
    try:
        assert run(stack, "stream_submit", {**job, "app_version": "1"}, token)["state"] == "success"
        supervisor = run(stack, "stream_supervisor", {"job_home": str(home)}, token, wait=False)["dag_run_id"]
        wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")

        # 1. kill -9, nothing triggered: running again, committing, within the bound; restarted once.
        killed_pid = status()["pid"]
        killed = kill(home)
        wait_for(lambda: status().get("pid") != killed_pid and status().get("state") == "RUNNING"
                 and (status().get("batches_this_run") or 0) >= 1, "the supervisor's restart",
                 RECOVERY_BOUND_SECONDS)
        print(f"recovered {time.time() - killed:.1f}s after the kill")
        assert operations(home).count("watchdog-restart") == 1
        wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")
    finally:
        sent = feeder.stop()
    ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
    wanted = {topic: {str(p): end for p, end in ends.items()}}
    wait_for(lambda: status().get("last_offsets") == wanted, "the restarted job to catch up")

    # 2. Stopped on purpose: the supervision ends and nothing restarts the job.
    token = stack.token()
    assert run(stack, "stream_stop", {"job_home": str(home)}, token)["state"] == "success"
    ended = stack.wait_for_run("stream_supervisor", supervisor, timeout=120, token=token)
    assert ended["state"] == "success", ended
    time.sleep(5)
    assert drivers_of(home) == [] and status()["state"] == "STOPPED"
    assert operations(home).count("watchdog-restart") == 1
    ids = output_ids(output)
    assert len(ids) == len(set(ids)), "a record written twice"
    assert set(ids) == {f"e{i}" for i in range(sent)}, "a record lost"

    # 3. A crash loop: a new submit (a new restart budget), a crash restarted once (the limit), the next one
    # given up on: the supervisor fails, names the loop, and the job stays down. Nothing is fed any more: the
    # submit succeeds once the job runs (min_batches 0).
    assert run(stack, "stream_submit", {**job, "app_version": "1", "min_batches": 0}, token)["state"] == "success"
    supervisor = run(stack, "stream_supervisor", {"job_home": str(home)}, token, wait=False)["dag_run_id"]
    wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")
    first_pid = status()["pid"]
    kill(home)
    wait_for(lambda: status().get("pid") != first_pid and status().get("state") == "RUNNING",
             "the restart within the limit", RECOVERY_BOUND_SECONDS)
    wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")
    kill(home)
    given_up = stack.wait_for_run("stream_supervisor", supervisor, timeout=120, token=stack.token())
    assert given_up["state"] == "failed", given_up
    record = JobHome(str(home)).history()[-1]
    assert record["operation"] == "watchdog-give-up" and "crash loop" in record["error"], record
    assert "gave up: 1 restart(s) in the last 3600s (1 by the supervisor)" in record["error"], record
    assert operations(home).count("watchdog-restart") == 2
    assert {r["args"].get("restarter") for r in JobHome(str(home)).history()
            if r["operation"] == "watchdog-restart"} == {"supervisor"}
    shown = job_status(JobHome(str(home)))
    assert (shown.state, shown.recorded_state) == ("GAVE_UP", "RUNNING"), shown
    time.sleep(5)
    assert drivers_of(home) == [], "a job given up on stays down"
