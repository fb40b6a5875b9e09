"""The watchdog and the supervisor share one restart budget, and the give-up counts and names both.

Found from outside: a watchdog restart used the supervisor's budget, so the supervisor gave up after two of its
own restarts, and nothing said why. Here a real local job home and its history: restarts recorded by each, then
one more death.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core.failover import FAILOVER, FAILOVER_OPERATION
from airflow_kafka_stream.core.watchdog import Policy, Restart
from airflow_kafka_stream.errors import WatchdogGaveUp
from airflow_kafka_stream.ops.inspect import job_status
from airflow_kafka_stream.ops.watchdog import RESTART_OPERATION, restarts_in_history, watch
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation


class NoLaunch:
    """A give-up launches nothing: any launch is a failure of the test."""

    def launch(self, *args, **kwargs):
        raise AssertionError("a crash loop was restarted once more")


def failed_job(tmp_path, restarters: list[str | None]) -> JobHome:
    home = JobHome(str(tmp_path))
    (tmp_path / "job.json").write_text(json.dumps({"job": "orders", "version": "1"}))
    (tmp_path / "status.json").write_text(json.dumps({
        "job": "orders", "state": "FAILED", "error": "cannot parse record 41",
        "started_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat()}))
    for who in restarters:
        args = {"reason": "the job FAILED", "action": "restart", "version": "1"}
        with recorded_operation(home, RESTART_OPERATION, args if who is None else {**args, "restarter": who},
                                lock=False) as record:
            record["after"] = {"action": "launched"}
    return home


def test_restarts_are_read_with_who_made_them(tmp_path):
    home = failed_job(tmp_path, ["supervisor", "watchdog", None])
    assert [r.by for r in restarts_in_history(home)] == ["supervisor", "watchdog", None]
    assert all(isinstance(r, Restart) for r in restarts_in_history(home))


@pytest.mark.parametrize("restarter", ["watchdog", "supervisor"])
def test_a_give_up_counts_the_shared_budget_by_restarter(tmp_path, restarter):
    home = failed_job(tmp_path, ["supervisor", "watchdog", "supervisor"])
    with pytest.raises(WatchdogGaveUp) as gave_up:
        watch(home, None, Policy(max_restarts=3, window_seconds=600), NoLaunch(), restarter=restarter)
    message = str(gave_up.value)
    assert "gave up: 3 restart(s) in the last 600s (2 by the supervisor, 1 by the watchdog)" in message, message
    assert "cannot parse record 41" in message
    record = home.history()[-1]
    assert (record["operation"], record["args"]["restarter"]) == ("watchdog-give-up", restarter), record
    shown = job_status(home)
    assert (shown.state, shown.recorded_state) == ("GAVE_UP", "FAILED"), shown
    assert "(2 by the supervisor, 1 by the watchdog)" in shown.state_reason


def test_within_the_budget_nothing_is_given_up(tmp_path):
    home = failed_job(tmp_path, ["supervisor"])
    result = watch(home, None, Policy(max_restarts=3, window_seconds=600, backoff_seconds=3600), NoLaunch(),
                   restarter="supervisor")
    assert result.action == "wait-backoff", result


def test_an_unknown_restarter_is_refused(tmp_path):
    with pytest.raises(ValueError, match="restarter must be one of watchdog, supervisor"):
        watch(failed_job(tmp_path, []), None, Policy(), NoLaunch(), restarter="cron")


def test_a_hot_standbys_failovers_spend_the_same_budget(tmp_path):
    """A failover is a restart of the one budget: with one by each of the three, a fourth death is given up."""
    home = failed_job(tmp_path, ["supervisor", "watchdog"])
    with recorded_operation(home, FAILOVER_OPERATION, {"restarter": FAILOVER, "reason": "the driver is gone"},
                            lock=False) as record:
        record["after"] = {"without_driver_seconds": 2.0}
    assert sorted(str(r.by) for r in restarts_in_history(home)) == ["failover", "supervisor", "watchdog"]
    with pytest.raises(WatchdogGaveUp) as gave_up:
        watch(home, None, Policy(max_restarts=3, window_seconds=600), NoLaunch(), restarter="watchdog")
    assert ("(1 by the hot standby's failover, 1 by the supervisor, 1 by the watchdog)" in str(gave_up.value)
            ), str(gave_up.value)
