"""The Airflow layer against a real job: a real driver process, real broker, real Airflow (dag.test).

One example pipeline runs as a detached driver; DAGs wait for it (deferred and in poke mode), are
refused a reset while it runs, wait for its graceful stop, verify it, plan a reset and execute one.
"""

from __future__ import annotations

import json

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.lifecycle.test_exactly_once import PARTITIONS, Pipeline, events, group_offsets
from tests.kafka_utils import create_topic, produce, unique, watermarks

pytestmark = pytest.mark.integration

HEADER = """
from airflow.sdk import DAG
from airflow_kafka_stream.operators.reset import StreamResetOperator
from airflow_kafka_stream.operators.verify import StreamVerifyOperator
from airflow_kafka_stream.sensors.job_state import StreamJobStateSensor
HOME = {home!r}
"""


def dag_source(dag_id: str, home: str, body: str) -> str:
    return HEADER.format(home=home) + f"\nwith DAG({dag_id!r}, schedule=None, catchup=False) as dag:\n" + body


def test_dags_wait_for_verify_and_reset_a_real_job(tmp_path, kafka_bootstrap, airflow_db, monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("af-ops"), PARTITIONS)
    group = unique("af-ops-group")
    produce(kafka_bootstrap, topic, events(0, 40))
    set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
    pipeline = Pipeline(tmp_path, kafka_bootstrap, topic, group)
    home = str(pipeline.home)
    try:
        waited = run_dag("aks_wait_running", dag_source("aks_wait_running", home, """
    StreamJobStateSensor(task_id="deferred", job_home=HOME, target_states=["RUNNING"], min_batches=1,
                         deferrable=True, poke_interval=1, timeout=240)
    StreamJobStateSensor(task_id="poked", job_home=HOME, target_states=["RUNNING"], min_batches=1,
                         deferrable=False, mode="poke", poke_interval=1, timeout=240)
    from airflow_kafka_stream.sensors.health import StreamJobHealthSensor
    StreamJobHealthSensor(task_id="healthy_poked", job_home=HOME, min_batches=1, window_seconds=3,
                          deferrable=False, mode="poke", poke_interval=1, timeout=240)
"""))
        assert waited.tasks == {"deferred": "success", "poked": "success", "healthy_poked": "success"}, \
            pipeline.log_tail()
        assert waited.xcom("deferred")["state"] == "RUNNING"
        assert waited.xcom("poked")["batches_this_run"] >= 1
        assert waited.xcom("healthy_poked")["job"]["state"] == "RUNNING"

        ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
        pipeline.wait_for_offsets(topic, ends)
        before = read_position(JobHome(home).checkpoint_url()).source_offsets(0)
        refused = run_dag("aks_reset_running", dag_source("aks_reset_running", home, """
    StreamResetOperator(task_id="reset", job_home=HOME, strategy="to-earliest", execute=True)
"""))
        assert refused.tasks == {"reset": "failed"}
        record = JobHome(home).history()[-1]
        assert (record["operation"], record["result"]) == ("reset", "refused")
        assert "is running" in record["error"]
        assert read_position(JobHome(home).checkpoint_url()).source_offsets(0) == before

        # The stop operator waiting in its worker slot (not deferred); the sensor then sees STOPPED, deferred.
        stopped = run_dag("aks_wait_stopped", dag_source("aks_wait_stopped", home, """
    from airflow_kafka_stream.operators.stop import StreamStopOperator
    stop = StreamStopOperator(task_id="stop", job_home=HOME, savepoint=False, deferrable=False, poll_seconds=0.5,
                              timeout_seconds=240)
    stop >> StreamJobStateSensor(task_id="stopped", job_home=HOME, target_states=["STOPPED"], deferrable=True,
                                 poke_interval=1, timeout=240)
"""))
        assert stopped.tasks == {"stop": "success", "stopped": "success"}, pipeline.log_tail()
        assert stopped.xcom("stop")["state"] == "STOPPED" and stopped.xcom("stop")["was_running"]
        assert stopped.xcom("stop")["savepoint"] is None
        assert any((r["operation"], r["result"]) == ("stop", "ok") for r in JobHome(home).history())
        assert pipeline.wait_exit() == 0
    finally:
        pipeline.kill()

    wanted = {topic: {str(p): end for p, end in ends.items()}}
    verified = run_dag("aks_verify", dag_source("aks_verify", home, """
    StreamVerifyOperator(task_id="verify", job_home=HOME)
"""))
    assert verified.tasks == {"verify": "success"}
    report = verified.xcom("verify")
    assert report["status"] == "OK"
    from urllib.parse import quote

    # The task's "Stream job" extra link, persisted as Airflow 3 reads it, names the job home it worked on.
    assert verified.xcom("verify", "_link_StreamJobPageLink") == f"/stream-jobs/?home={quote(home, safe='')}"
    assert {(p["topic"], str(p["partition"])): p["checkpoint_offset"] for p in report["partitions"]} == {
        (topic, part): off for part, off in wanted[topic].items()}

    planned = run_dag("aks_reset_plan", dag_source("aks_reset_plan", home, """
    StreamResetOperator(task_id="plan", job_home=HOME, strategy="to-earliest")
"""))
    assert planned.tasks == {"plan": "success"}
    plan = planned.xcom("plan")
    assert plan["executed"] is False
    assert {row["target"] for row in plan["plan"]["partitions"]} == {0}
    assert read_position(JobHome(home).checkpoint_url()).source_offsets(0) == before, "a dry run changed nothing"
    assert group_offsets(kafka_bootstrap, group, topic) == wanted

    executed = run_dag("aks_reset_execute", dag_source("aks_reset_execute", home, """
    StreamResetOperator(task_id="reset", job_home=HOME, strategy="to-earliest", execute=True)
"""))
    assert executed.tasks == {"reset": "success"}
    outcome = executed.xcom("reset")
    assert outcome["executed"] is True and outcome["verified"] is True, json.dumps(outcome)[:2000]
    assert set(read_position(JobHome(home).checkpoint_url()).source_offsets(0).values()) == {0}
    assert group_offsets(kafka_bootstrap, group, topic) == {topic: {str(p): 0 for p in range(PARTITIONS)}}


    # The group follows the checkpoint: the sync sensor passes deferred and poked, and fails when it does not.
    synced = run_dag("aks_group_sync", dag_source("aks_group_sync", home, """
    from airflow_kafka_stream.sensors.group_sync import StreamGroupSyncSensor
    StreamGroupSyncSensor(task_id="deferred", job_home=HOME, deferrable=True, poke_interval=1, timeout=60)
    StreamGroupSyncSensor(task_id="poked", job_home=HOME, deferrable=False, mode="poke", poke_interval=1, timeout=60)
"""))
    assert synced.tasks == {"deferred": "success", "poked": "success"}
    assert synced.xcom("deferred")["in_sync"] and synced.xcom("poked")["partitions"] == PARTITIONS
    from tests.integration.cli_helpers import commit_group

    commit_group(kafka_bootstrap, group, {TopicPartition(topic, 0): 3})
    drifted = run_dag("aks_group_drift", dag_source("aks_group_drift", home, """
    from airflow_kafka_stream.sensors.group_sync import StreamGroupSyncSensor
    StreamGroupSyncSensor(task_id="deferred", job_home=HOME, deferrable=True, poke_interval=1, timeout=3)
"""))
    assert drifted.tasks == {"deferred": "failed"}

    # Housekeeping keeps the newest and a pinned savepoint, whatever the limits.
    from airflow_kafka_stream.ops.savepoints import create, list_all, pin

    made = [create(JobHome(home)).id for _ in range(3)]
    pin(JobHome(home), made[0], "an upgrade may roll back to it")
    pruned = run_dag("aks_housekeeping", dag_source("aks_housekeeping", home, """
    from airflow_kafka_stream.operators.savepoints import StreamSavepointHousekeepingOperator
    StreamSavepointHousekeepingOperator(task_id="prune", job_home=HOME, keep_last=1)
"""))
    assert pruned.tasks == {"prune": "success"}
    assert pruned.xcom("prune")["deleted"] == [made[1]]
    assert sorted(s.id for s in list_all(JobHome(home))) == sorted([made[0], made[2]])
    from airflow_kafka_stream.errors import JobStateError
    from airflow_kafka_stream.ops.savepoints import delete

    with pytest.raises(JobStateError, match="pinned"):
        delete(JobHome(home), made[0])


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"strategy": "to-yesterday"}, "strategy"),
    ({"strategy": "to-datetime"}, "value"),
    ({"strategy": "to-earliest", "value": "5"}, "value"),
])
def test_reset_operator_refuses_bad_arguments_naming_them(kwargs, named):
    from airflow_kafka_stream.errors import InvalidInputError
    from airflow_kafka_stream.operators.reset import StreamResetOperator

    with pytest.raises(InvalidInputError, match=named):
        StreamResetOperator(task_id="r", job_home="/tmp/x", **kwargs)


def test_a_mistyped_job_home_is_refused_by_airflow_and_the_cli_alike(tmp_path, airflow_db, capsys):
    """The job-home check lives in the operations: an Airflow task gets the CLI's refusal, and nothing is created."""
    from tests.integration.cli_helpers import cli

    home = str(tmp_path / "no-such-job")
    outcome = run_dag("aks_mistyped_home", dag_source("aks_mistyped_home", home, """
    from airflow_kafka_stream.operators.stop import StreamStopOperator
    from airflow_kafka_stream.operators.savepoints import StreamRestoreOperator
    StreamStopOperator(task_id="stop", job_home=HOME, deferrable=False)
    StreamRestoreOperator(task_id="restore", job_home=HOME, savepoint_id="sp-x")
"""))
    assert outcome.tasks == {"stop": "failed", "restore": "failed"}
    refused = cli(capsys, "stop", "--job-home", home)
    assert refused.code == 2
    assert "is not a job home" in refused.err and "--job-home" in refused.err, refused.err
    assert not (tmp_path / "no-such-job").exists(), "a refused operation created the job home"
