"""One shown state, from the liveness rule, in ``status`` (text and JSON) and the job page's summary.

Found from outside: right after a ``kill -9`` the job page said "RUNNING (no heartbeat: driver gone?)" and
``status`` printed "state RUNNING" beside "running: false"; after the watchdog gave up, still RUNNING. Here a
real local job home, and a driver whose processes really exited on this host.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from datetime import UTC, datetime

from airflow_kafka_stream import cli
from airflow_kafka_stream.plugins.job_view import summary
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation


def exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def killed_driver_home(tmp_path) -> JobHome:
    """A RUNNING status with a heartbeat a second old, whose Python process and JVM no longer exist here."""
    now = datetime.now(UTC)
    (tmp_path / "job.json").write_text(json.dumps({"job": "orders", "version": "2"}))
    (tmp_path / "status.json").write_text(json.dumps({
        "job": "orders", "state": "RUNNING", "heartbeat_epoch": now.timestamp() - 1, "heartbeat": now.isoformat(),
        "heartbeat_interval_seconds": 5, "started_at": now.isoformat(), "pid": exited_pid(),
        "jvm_pid": exited_pid(), "host": socket.gethostname(), "last_batch_id": 4}))
    return JobHome(str(tmp_path))


def status_json(capsys, home: JobHome) -> tuple[int, dict]:
    code = cli.main(["status", "--job-home", home.url, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_killed_driver_is_dead_at_once_everywhere(tmp_path, capsys):
    home = killed_driver_home(tmp_path)
    code, shown = status_json(capsys, home)
    assert (code, shown["state"], shown["recorded_state"], shown["running"]) == (1, "DEAD", "RUNNING", False)
    assert "no longer exist" in shown["state_reason"], shown
    assert cli.main(["status", "--job-home", home.url]) == 1
    assert "state           DEAD (its last status says RUNNING" in capsys.readouterr().out
    page = summary(home, datetime.now(UTC))
    assert (page["state"], page["recorded_state"]) == ("DEAD", "RUNNING"), page


def test_a_run_recovery_gave_up_on_reads_gave_up_with_the_reason(tmp_path, capsys):
    home = killed_driver_home(tmp_path)
    reason = "the driver is gone; gave up: 3 restart(s) in the last 600s (2 by the supervisor, 1 by the watchdog)"
    with recorded_operation(home, "watchdog-give-up", {"reason": reason}, lock=False) as record:
        record["result"], record["error"] = "failed", reason
    code, shown = status_json(capsys, home)
    assert (code, shown["state"], shown["recorded_state"]) == (1, "GAVE_UP", "RUNNING"), shown
    assert reason in shown["state_reason"], shown
    assert summary(home, datetime.now(UTC))["state"] == "GAVE_UP"


def test_stopping_a_job_recovery_gave_up_on_acknowledges_it_and_recovery_leaves_it_down(tmp_path, capsys):
    """The job page's "Acknowledge: keep it stopped" is ``stream_stop`` on a GAVE_UP job: the stop request stays,
    the shown state says who acknowledged it, and the watchdog (or supervisor) does not start it again."""
    from airflow_kafka_stream.core.watchdog import Action, Policy
    from airflow_kafka_stream.ops.stop import stop_job
    from airflow_kafka_stream.ops.watchdog import assess

    home = killed_driver_home(tmp_path)
    with recorded_operation(home, "watchdog-give-up", {"reason": "crash loop"}, lock=False) as record:
        record["result"], record["error"] = "failed", "crash loop"
    assert assess(home, Policy(max_restarts=5)).action is Action.RESTART, "without the acknowledgement it restarts"
    stopped = stop_job(home, timeout=5, savepoint=False, by="ops@example")
    assert (stopped.was_running, home.stop_requested()) == (False, True)
    code, shown = status_json(capsys, home)
    assert shown["state"] == "GAVE_UP" and "acknowledged by ops@example" in shown["state_reason"], shown
    decision = assess(home, Policy(max_restarts=5))
    assert decision.action is Action.NOTHING and decision.stopped_on_purpose, decision
    request = [r for r in home.history() if r["operation"] == "stop-request"][-1]
    assert request["after"] == {"requested": False, "kept_stopped": True}


def test_stopping_a_job_that_stopped_by_itself_leaves_no_request(tmp_path):
    from airflow_kafka_stream.ops.stop import stop_job
    from airflow_kafka_stream.storage.status import write_status

    home = JobHome(str(tmp_path))
    home.write_spec({"job": "j", "version": "1"})
    write_status(home.url, {"job": "j", "state": "STOPPED", "last_batch_id": 3, "heartbeat_epoch": 0})
    stop_job(home, timeout=5, savepoint=False)
    assert not home.stop_requested()
