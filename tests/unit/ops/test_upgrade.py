"""The upgrade's decision (``decide_outcome``): every combination of what its steps can return, as a table.

The pure rule (``core.upgrade_outcome``) is checked for all of them, then ``decide_outcome`` on a real job
home: what it raises or returns, whether the savepoint stays pinned, and what the standby's rehearsal found
(reported on success, whatever its verdict was).
"""

from __future__ import annotations

import itertools
import re

import pytest

from airflow_kafka_stream.core.rehearsal import Verdict
from airflow_kafka_stream.core.upgrade_outcome import UpgradeVerdict, judge_upgrade
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops.results import SavepointInfo, StandbyHandle, StopResult
from airflow_kafka_stream.ops.savepoints import pin
from airflow_kafka_stream.ops.upgrade import UpgradeFailed, decide_outcome
from airflow_kafka_stream.storage.jobhome import JobHome

SAVEPOINT = "sp-20261128-0001"
BOOLS = (False, True)


def expected_verdict(stopped: bool, healthy: bool, rolled_back: bool, rollback: bool) -> UpgradeVerdict:
    """The table, written as the rows a reader checks: the first matching row wins."""
    rows = [
        (lambda: not stopped, UpgradeVerdict.NOTHING_CHANGED),
        (lambda: healthy, UpgradeVerdict.UPGRADED),
        (lambda: rolled_back, UpgradeVerdict.ROLLED_BACK),
        (lambda: not rollback, UpgradeVerdict.LEFT_AS_IS),
        (lambda: True, UpgradeVerdict.ROLLBACK_INCOMPLETE),
    ]
    return next(verdict for matches, verdict in rows if matches())


#: A failed upgrade that did not roll back needs the savepoint for a rollback by hand.
KEEPS_THE_SAVEPOINT_PINNED = {UpgradeVerdict.LEFT_AS_IS, UpgradeVerdict.ROLLBACK_INCOMPLETE,
                              UpgradeVerdict.NOTHING_CHANGED}
COMBINATIONS = list(itertools.product(BOOLS, BOOLS, BOOLS, BOOLS))


@pytest.mark.parametrize(("stopped", "healthy", "rolled_back", "rollback"), COMBINATIONS)
def test_the_verdict_for_every_combination(stopped, healthy, rolled_back, rollback):
    verdict = judge_upgrade(stopped_with_savepoint=stopped, healthy=healthy, rolled_back=rolled_back,
                            rollback=rollback)
    assert verdict is expected_verdict(stopped, healthy, rolled_back, rollback)
    assert verdict.unpins_savepoint == (verdict not in KEEPS_THE_SAVEPOINT_PINNED)


def test_every_verdict_is_reachable():
    assert {expected_verdict(*combination) for combination in COMBINATIONS} == set(UpgradeVerdict)


def _stop_result(stopped: bool, as_xcom: bool) -> StopResult:
    """The stop's result, or the same read back from its XCom form (the Airflow task group's path)."""
    result = StopResult("home", True, False, "STOPPED", 7, {}, app_version="1.0",
                        savepoint=SavepointInfo(SAVEPOINT, "2026-11-28T10:00:00+00:00", 7, None, None, {}, "1.0",
                                                  "4.0.1", False, None, 3)
                        if stopped else None)
    return StopResult.from_dict(result.to_dict()) if as_xcom else result


def _standby(home: JobHome, verdict: Verdict | None) -> StandbyHandle | None:
    if verdict is None:
        return None
    handle = StandbyHandle("tok", "2.0", 4242, "localhost", "/tmp/driver.log", "2026-11-28T09:59:00+00:00")
    home.write_standby_record({"token": handle.token, "state": "ACTIVE", "rehearsal": {"verdict": str(verdict)}})
    return handle


@pytest.mark.parametrize(("stopped", "healthy", "rolled_back", "rollback"), COMBINATIONS)
@pytest.mark.parametrize("rehearsal", [None, Verdict.COMPATIBLE, Verdict.NEEDS_DROP_STATE])
@pytest.mark.parametrize("as_xcom", BOOLS, ids=["dataclass", "xcom"])
def test_decide_outcome_acts_on_the_verdict(tmp_path, stopped, healthy, rolled_back, rollback, rehearsal, as_xcom):
    (tmp_path / "checkpoints").mkdir()
    home = JobHome(str(tmp_path))
    if stopped:
        pin(home, SAVEPOINT, "upgrade to version 2.0 may roll back to it")
    standby = _standby(home, rehearsal)
    health = {"status": "success", "message": "RUNNING, 3 batches, lag 0"} if healthy else None
    restored = {"state": "RUNNING", "generation": 3} if rolled_back else None
    verdict = expected_verdict(stopped, healthy, rolled_back, rollback)

    def decide():
        return decide_outcome(home, "2.0", _stop_result(stopped, as_xcom), health, restored, rollback,
                              standby=standby)

    if verdict is UpgradeVerdict.UPGRADED:
        outcome = decide()
        assert (outcome.upgraded, outcome.version, outcome.savepoint, outcome.previous_version) == (
            True, "2.0", SAVEPOINT, "1.0")
        assert outcome.health == "RUNNING, 3 batches, lag 0"
        assert outcome.rehearsal == ({"verdict": str(rehearsal)} if rehearsal else None)
    else:
        expected_error, says = {
            UpgradeVerdict.NOTHING_CHANGED: (JobStateError, "failed before any downtime"),
            UpgradeVerdict.ROLLED_BACK: (UpgradeFailed, "was rolled back: version 1.0 runs again from savepoint "
                                                        f"{SAVEPOINT} (generation 3)"),
            UpgradeVerdict.LEFT_AS_IS: (UpgradeFailed, "rollback is off, so the new version is left as it is"),
            UpgradeVerdict.ROLLBACK_INCOMPLETE: (UpgradeFailed, "the rollback did not complete"),
        }[verdict]
        with pytest.raises(expected_error, match=re.escape(says)):
            decide()
    assert (SAVEPOINT in home.pins()) == (stopped and verdict in KEEPS_THE_SAVEPOINT_PINNED)


def test_a_stop_result_reads_back_from_its_xcom_form_exactly():
    for stopped in (True, False):
        result = _stop_result(stopped, as_xcom=False)
        assert StopResult.from_dict(result.to_dict()) == result
        assert StopResult.from_dict({**result.to_dict(), "handover": {"pid": 1}}) == result  # extra keys: ignored


# -- the standby phase (start_standby): the same decisions for the command line and the task group -------------

class NoLaunch:
    """A launcher a decision must not reach: the phase decided without starting a driver."""

    kafka: dict = {}

    def launch(self, *args, **kwargs):
        raise AssertionError("a driver was launched")


def _running_job(tmp_path, state: str = "RUNNING") -> JobHome:
    import json
    import os
    import socket
    import time

    (tmp_path / "checkpoints").mkdir(exist_ok=True)
    (tmp_path / "status.json").write_text(json.dumps({
        "state": state, "heartbeat_epoch": time.time(), "heartbeat_interval_seconds": 5, "pid": os.getpid(),
        "host": socket.gethostname(), "app_version": "1"}))
    return JobHome(str(tmp_path))


def _live_standby(home: JobHome, version: str, rehearse: dict) -> None:
    import os
    import socket
    import time

    home.write_standby_record({"token": "tok", "state": "READY", "version": version, "pid": os.getpid(),
                               "host": socket.gethostname(), "heartbeat_epoch": time.time(),
                               "heartbeat_interval_seconds": 1, "launched_at": "2026-11-28T10:00:00+00:00",
                               "log": "/tmp/standby.log", "rehearse": rehearse})


def test_a_job_that_does_not_run_gets_no_standby_and_says_why(tmp_path):
    from airflow_kafka_stream.ops.launcher import Submission
    from airflow_kafka_stream.ops.upgrade import start_standby
    from airflow_kafka_stream.ops.upgrade_options import UpgradeOptions

    home = _running_job(tmp_path, "STOPPED")
    said = []
    assert start_standby(home, Submission("2"), NoLaunch(), UpgradeOptions(), say=said.append) is None
    assert said == [f"job {home.url} does not run (state STOPPED): there is nothing to take over from, version 2 "
                    "starts cold"]


def test_a_live_standby_of_the_same_version_is_adopted_not_launched_again(tmp_path):
    from airflow_kafka_stream.ops.launcher import Submission
    from airflow_kafka_stream.ops.upgrade import start_standby
    from airflow_kafka_stream.ops.upgrade_options import UpgradeOptions

    home = _running_job(tmp_path)
    _live_standby(home, "2", {"drop_state": False})
    said = []
    handle = start_standby(home, Submission("2"), NoLaunch(), UpgradeOptions(), say=said.append)
    assert (handle.token, handle.app_version) == ("tok", "2") and said[-1].startswith("using the live standby")


def test_a_standby_that_rehearsed_without_the_state_is_refused_for_an_upgrade_that_keeps_it(tmp_path):
    from airflow_kafka_stream.ops.launcher import Submission
    from airflow_kafka_stream.ops.upgrade import start_standby
    from airflow_kafka_stream.ops.upgrade_options import UpgradeOptions

    home = _running_job(tmp_path)
    _live_standby(home, "2", {"drop_state": True})
    with pytest.raises(JobStateError, match="rehearsed without the job's state") as raised:
        start_standby(home, Submission("2"), NoLaunch(), UpgradeOptions(drop_state=False))
    assert raised.value.settings == ("drop_state",)
    assert start_standby(home, Submission("2"), NoLaunch(), UpgradeOptions(drop_state=True)).token == "tok"


def test_the_command_line_and_the_task_group_take_the_upgrades_defaults_from_one_place():
    import inspect

    from airflow_kafka_stream.cli import build_parser
    from airflow_kafka_stream.operators.upgrade import TASK_POLL_SECONDS, stream_upgrade_task_group
    from airflow_kafka_stream.ops.upgrade_options import DEFAULTS

    args = build_parser().parse_args(["upgrade", "--job-home", "/jobs/j", "--app-version", "2"])
    flags = {"health_batches": args.health_batches, "health_window_seconds": args.health_window,
             "health_startup_seconds": args.health_startup, "health_timeout_seconds": args.health_timeout,
             "stop_timeout_seconds": args.stop_timeout, "start_timeout_seconds": args.start_timeout,
             "standby_ready_timeout_seconds": args.standby_timeout,
             "rehearsal_timeout_seconds": args.rehearsal_timeout, "standby": args.standby,
             "drop_state": args.drop_state, "rollback": args.rollback, "takeover_stopped": args.takeover_stopped,
             "allow_sink_batch_log": args.allow_sink_batch_log}
    assert flags == {name: getattr(DEFAULTS, name) for name in flags}
    task_group = {name: p.default for name, p in inspect.signature(stream_upgrade_task_group).parameters.items()}
    assert {name: task_group[name] for name in flags} == flags
    assert task_group["poll_seconds"] == TASK_POLL_SECONDS  # the one default that differs, on purpose
