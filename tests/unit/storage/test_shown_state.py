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
