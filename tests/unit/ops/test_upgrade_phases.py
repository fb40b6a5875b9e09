"""One list of the upgrade's phases (``ops.upgrade_phases``): the command line's run enters them in its order,
and the Airflow task group names its tasks for them and chains them in the same order."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.ops import upgrade as ops_upgrade
from airflow_kafka_stream.ops.launcher import Submission
from airflow_kafka_stream.ops.upgrade_options import UpgradeOptions
from airflow_kafka_stream.ops.upgrade_phases import FORWARD, ROLLBACK, UpgradePhase

ORDER = list(UpgradePhase)


class FakeGate:
    def __init__(self, *args, **kwargs) -> None:
        pass


@pytest.fixture
def entered(monkeypatch):
    """Runs the command line's upgrade with every I/O step replaced by a stand-in that succeeds (the health gate
    as told); returns the phases it entered."""
    stopped = SimpleNamespace(savepoint=SimpleNamespace(id="sp1"), app_version="1")  # what savepoint_of reads
    started = SimpleNamespace(submitted_at="2026-11-28T10:00:00+00:00")
    stand_ins = {"start_standby": lambda *a, **k: SimpleNamespace(token="tok"), "wait_ready": lambda *a, **k: None,
                 "stop_job": lambda *a, **k: stopped, "restore": lambda *a, **k: SimpleNamespace(generation=2),
                 "hand_over": lambda *a, **k: started, "submit": lambda *a, **k: started,
                 "replay": lambda *a, **k: started, "conclude_start": lambda *a, **k: {},
                 "HealthLook": FakeGate, "decide_outcome": lambda *a, **k: "decided",
                 "keep_hot_standby": lambda *a, **k: None}
    for name, stand_in in stand_ins.items():
        monkeypatch.setattr(ops_upgrade, name, stand_in)

    def run(options: UpgradeOptions, healthy: bool) -> list[UpgradePhase]:
        gate = {"status": WaitStatus.SUCCESS if healthy else WaitStatus.FAILED, "message": "m"}
        monkeypatch.setattr(ops_upgrade, "wait", lambda look, *a: gate if isinstance(look, FakeGate) else {})
        phases: list[UpgradePhase] = []
        home = SimpleNamespace(require=lambda: None)
        assert ops_upgrade.upgrade(home, Submission("2"), None, {}, options, say=lambda _: None,
                                   enter=phases.append) == "decided"
        return phases

    return run


@pytest.mark.parametrize("standby", [True, False])
@pytest.mark.parametrize("drop_state", [True, False])
@pytest.mark.parametrize(("healthy", "rollback"), [(True, True), (False, True), (False, False)])
def test_the_command_line_enters_the_phases_in_their_order(entered, standby, drop_state, healthy, rollback):
    phases = entered(UpgradeOptions(standby=standby, drop_state=drop_state, rollback=rollback), healthy)
    assert phases == sorted(phases, key=ORDER.index) and len(set(phases)) == len(phases), phases
    skipped = {UpgradePhase.STANDBY: not standby, UpgradePhase.RESTORE: not drop_state}
    assert [p for p in FORWARD if not skipped.get(p)] == [p for p in phases if p in FORWARD]
    assert [p for p in phases if p in ROLLBACK] == (list(ROLLBACK) if not healthy and rollback else [])
    assert phases[-1] is UpgradePhase.OUTCOME


def test_the_task_group_has_a_task_per_phase_chained_in_their_order():
    from airflow.sdk import DAG

    from airflow_kafka_stream.operators.upgrade import stream_upgrade_task_group

    with DAG("phases", schedule=None) as dag:
        stream_upgrade_task_group(job_home="/jobs/j", new_version="2", drop_state="{{ params.d }}",
                                  standby="{{ params.s }}", rollback="{{ params.r }}")
    tasks = {task.task_id.removeprefix("upgrade."): task for task in dag.tasks}
    assert set(tasks) == {phase.value for phase in UpgradePhase}

    def after(first: UpgradePhase, then: UpgradePhase) -> bool:
        return then.value in {t.task_id.removeprefix("upgrade.") for t in tasks[first.value].get_flat_relatives()}

    for chain in (FORWARD, ROLLBACK):
        for first, then in zip(chain, chain[1:], strict=False):
            assert after(first, then), (first, then)
    assert after(UpgradePhase.HEALTH, UpgradePhase.ROLLBACK_STOP)
    assert after(UpgradePhase.HEALTH, UpgradePhase.OUTCOME) and after(UpgradePhase.ROLLBACK_START,
                                                                      UpgradePhase.OUTCOME)
