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
