"""Burrow's window rules and lag objectives against a real broker, real Spark and a real driver.

- REWIND: a stopped job's group moved back by a plain consumer commit (no reset recorded); not after a
  recorded ``reset --to-earliest``; again when it moves back past a recorded ``reset --shift-by``'s targets.
- One throttled driver (a small ``maxOffsetsPerTrigger``): the objective sensor passes while it is caught up;
  with a producer faster than the job, verify's looks say WARN and the objective sensor fails with the
  partitions named; frozen (SIGSTOP) while records wait, verify says STOP.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from airflow_kafka_stream.core.lag_window import WindowStatus
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.ops.context import build_context
from airflow_kafka_stream.ops.verify import verify
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.airflow_helpers import kafka_connection, run_dag, set_connection
from tests.integration.airflow.test_airflow_upgrade import example_dag
from tests.integration.cli_helpers import cli, commit_group, make_job
from tests.integration.lifecycle.test_exactly_once import PARTITIONS, Pipeline, events
from tests.kafka_utils import create_topic, produce, unique, watermarks

pytestmark = pytest.mark.integration


def window_of(result) -> dict:
    return result.json()["window"]


def test_rewind_outside_a_reset_and_none_after_a_recorded_reset(spark, kafka_bootstrap, tmp_path, capsys):
    topic = create_topic(kafka_bootstrap, unique("win-rewind"), 2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"r-{p}-{i}") for i in range(8)], partition=p)
    job = make_job(spark, kafka_bootstrap, tmp_path / "home", {topic: 2})
    home = ("--job-home", str(job.home))
    first = cli(capsys, "verify", *home, "--json")
    assert first.code == 0 and window_of(first)["status"] == "OK" and window_of(first)["looks"] == 1, first.out

    # The job is stopped; something else commits an earlier offset to its group: nothing in the history explains it.
    tp0 = TopicPartition(topic, 0)
    commit_group(kafka_bootstrap, job.group, {tp0: 3})
    moved = cli(capsys, "verify", *home, "--json")
    window = window_of(moved)
    assert moved.code == 1
    assert (window["status"], window["rule"]) == ("REWIND", "rewound"), window
    finding = window["findings"][0]
    assert (finding["topic"], finding["partition"], finding["from_offset"], finding["to_offset"]) == (topic, 0, 8, 3)
    text = cli(capsys, "verify", *home)
    assert "window: REWIND (rewound)" in text.out and f"{topic}:0 REWIND rewound: group offset moved back from 8" \
        in text.out, text.out

    # Aligned again with a recorded reset (to-current): the group came back, the rewind is over.
    assert cli(capsys, "reset", *home, "--to-current", "--execute").code == 0
    back = cli(capsys, "verify", *home, "--json")
    assert back.code == 0 and window_of(back)["status"] == "OK", window_of(back)

    # A recorded reset to the earliest offsets moves the group back too: that is no rewind.
    assert cli(capsys, "reset", *home, "--to-earliest", "--execute").code == 0
    reset = cli(capsys, "verify", *home, "--json")
    assert job.group_offsets() == {tp0: 0, TopicPartition(topic, 1): 0}
    assert reset.code == 0 and window_of(reset)["status"] == "OK", window_of(reset)
    assert len(JobHome(str(job.home)).lag_window()) == 5, "every CLI look was kept"

    # A recorded reset excuses the move to its own targets, not a further move back in the same window.
    assert cli(capsys, "reset", *home, "--to-latest", "--execute").code == 0
    assert window_of(cli(capsys, "verify", *home, "--json"))["status"] == "OK"
    assert cli(capsys, "reset", *home, "--shift-by=-3", "--execute").code == 0
    commit_group(kafka_bootstrap, job.group, {tp0: 2})
    past = cli(capsys, "verify", *home, "--json")
    window = window_of(past)
    assert past.code == 1 and (window["status"], window["rule"]) == ("REWIND", "rewound"), window
    finding = window["findings"][0]
    assert (finding["partition"], finding["from_offset"], finding["to_offset"]) == (0, 8, 2), finding
    assert "set it to 5, not lower" in finding["detail"], finding


OBJECTIVE_DAG = """
from airflow.sdk import DAG
from airflow_kafka_stream.sensors.lag_objective import StreamLagObjectiveSensor

with DAG({dag_id!r}, schedule=None, catchup=False) as dag:
    StreamLagObjectiveSensor(task_id="objective", job_home={home!r}, max_lag_seconds={max_lag}, for_seconds={for_s},
                             deferrable={deferrable}, mode="poke", poke_interval=1, timeout=120)
"""


def objective_dag(dag_id: str, home: str, max_lag: float, for_s: float, deferrable: bool = False):
    return run_dag(dag_id, OBJECTIVE_DAG.format(dag_id=dag_id, home=home, max_lag=max_lag, for_s=for_s,
                                                deferrable=deferrable))


class Feeder:
    """A producer faster than the throttled job: a few records to each partition every fraction of a second."""

    def __init__(self, bootstrap: str, topic: str, start: int) -> None:
        self.bootstrap, self.topic, self.sent = bootstrap, topic, start
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.wait(0.2):
            produce(self.bootstrap, self.topic, events(self.sent, 8))
            self.sent += 8

    def __enter__(self) -> Feeder:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.done.set()
        self.thread.join(10)


def test_a_throttled_job_warns_breaches_its_objective_and_stops_when_frozen(kafka_bootstrap, tmp_path, airflow_db,
                                                                           monkeypatch):
    topic = create_topic(kafka_bootstrap, unique("win-throttled"), PARTITIONS)
    group = unique("win-throttled-group")
    produce(kafka_bootstrap, topic, events(0, 6))
    set_connection(monkeypatch, "kafka_default", kafka_connection(kafka_bootstrap))
    pipeline = Pipeline(tmp_path, kafka_bootstrap, topic, group, "--max-offsets-per-trigger", "2",
                        "--trigger-interval", "1 second")
    home = str(pipeline.home)
    frozen: list[int] = []
    try:
        # 1. Caught up (time lag 0): the objective holds, the sensor passes at once and records the objective.
        ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
        pipeline.wait_for_offsets(topic, ends)
        pipeline.wait_for(lambda: (pipeline.status().get("time_lag") or {}).get("max_seconds") == 0,
                          "a time lag measurement at 0")
        ctx = build_context(job_home=home, bootstrap_servers=kafka_bootstrap)
        healthy = objective_dag("aks_objective_ok", home, 60, 10)
        assert healthy.tasks == {"objective": "success"}, pipeline.log_tail()
        assert healthy.xcom("objective")["verdict"] == "met"
        assert JobHome(home).objective()["objective"] == {"max_lag_seconds": 60.0, "for_seconds": 10.0}

        with Feeder(kafka_bootstrap, topic, 6):
            # 2. A producer faster than the job: the lag grows at every commit of the window.
            deadline, result = time.monotonic() + 90, None
            while time.monotonic() < deadline:
                result = verify(ctx, window="PT60S")
                if result.window.status is WindowStatus.WARN:
                    break
                time.sleep(1.0)
            assert result is not None and result.window.status is WindowStatus.WARN, result.window.to_dict()
            warned = result.window.findings[0]
            assert warned.rule == "falling_behind" and warned.numbers["commits"] >= 3
            assert warned.numbers["lag_to"] > warned.numbers["lag_from"]
            assert result.exit_code == (0 if result.ok else 1), "a WARN alone does not fail verify"

            # 3. The objective (3 s, breached after 4 s above it) fails the task with the partitions named.
            breached = objective_dag("aks_objective_breach", home, 3, 4)
            assert breached.tasks == {"objective": "failed"}, pipeline.log_tail()
            record = next(r for r in reversed(JobHome(home).history()) if r["operation"] == "objective-breach")
            assert record["result"] == "breached" and record["args"] == {"max_lag_seconds": 3.0, "for_seconds": 4.0}
            named = {(p["topic"], p["partition"]) for p in record["after"]["partitions"]}
            assert named and named <= {(topic, p) for p in range(PARTITIONS)}
            assert all(p["seconds"] > 3 and p["trend"] in ("rising", "steady", "falling", "new")
                       for p in record["after"]["partitions"])
            assert f"{topic}:" in record["error"] and "breached" in record["error"]

            # The watchdog DAG checks the same objective after its pass (the job runs: nothing to restart); the
            # breach goes on (the sensor's memory), so the watchdog task fails, its XCom saying what it did.
            watched = run_dag("stream_watchdog", path=example_dag("stream_watchdog"),
                              conf={"job_home": home, "max_lag_seconds": 3, "max_lag_for_seconds": 4})
            assert watched.tasks == {"watchdog": "failed"}, pipeline.log_tail()
            assert watched.xcom("watchdog")["action"] == "nothing"
            assert sum(r["operation"] == "objective-breach" for r in JobHome(home).history()) == 2

            # 4. The driver frozen while records keep arriving: no commit for longer than the window.
            status = pipeline.status()
            frozen = [pid for pid in (status.get("pid"), status.get("jvm_pid")) if pid]
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            first = verify(ctx, window="PT8S")
            # The rate limit splits a batch's records by lag, so a partition with little lag can go a while
            # without a commit: the partitions that committed within the window before the freeze are the proof.
            stood = {f.partition for f in first.window.findings if f.status is WindowStatus.STOP}
            committing = {v.partition for v in first.partitions} - stood
            assert committing, first.window.to_dict()
            time.sleep(10)
            stopped = verify(ctx, window="PT8S")
        assert stopped.window.status is WindowStatus.STOP, stopped.window.to_dict()
        findings = {f.partition: f for f in stopped.window.findings}
        for tp in committing:
            assert findings[tp].status is WindowStatus.STOP and findings[tp].rule == "stopped", findings
            assert findings[tp].numbers["lag"] > 0 and findings[tp].numbers["idle_seconds"] > 8
        assert stopped.exit_code == 1
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        pipeline.kill()


def test_the_watchdog_dag_refuses_a_zero_or_negative_objective(airflow_db):
    from airflow.sdk.definitions.param import ParamValidationError

    from tests.airflow_helpers import load_dag

    dag = load_dag(example_dag("stream_watchdog"), "stream_watchdog")
    for conf in ({"max_lag_seconds": 0}, {"max_lag_for_seconds": -5}, {"max_lag_seconds": "soon"}):
        with pytest.raises(ParamValidationError):
            dag.test(run_conf={"job_home": "/tmp/nowhere", **conf}, logical_date=None)
