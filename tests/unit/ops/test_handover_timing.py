"""The times a standby upgrade's downtime is split by (bench upgrade, docs/standby.md "Downtime"): the standby's
record says when it saw its go, took the job and started its query, in that order; the stop's history record
says when the old driver stopped."""

from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops.stop import complete_stop, stop_job
from airflow_kafka_stream.runtime.standby import Standby
from airflow_kafka_stream.storage.jobhome import STANDBY_GO, STANDBY_RECORD, JobHome
from airflow_kafka_stream.storage.status import write_status


def test_the_standby_record_times_the_go_the_takeover_and_the_query_start(tmp_path):
    home = JobHome(str(tmp_path))
    standby = Standby(home, "mine", "2", heartbeat_seconds=0.2)
    thread = threading.Thread(target=standby.stand_by, args=(lambda: None,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while (home.read_control(STANDBY_RECORD) or {}).get("state") != rules.StandbyState.READY and time.monotonic() < deadline:
        time.sleep(0.02)
    home.write_control(STANDBY_GO, {"token": "mine", "action": rules.GO, "by": "upgrade",
                                    "at": datetime.now(UTC).isoformat()})
    thread.join(5)
    standby.took_over()
    standby.note_query_started()
    record = home.read_control(STANDBY_RECORD)
    assert record["state"] == rules.StandbyState.ACTIVE, "noting the query start changes no state"
    seen, taken, started = (datetime.fromisoformat(record[key]) for key in ("go_seen_at", "ended_at",
                                                                            "query_started_at"))
    assert datetime.fromisoformat(record["go_at"]) <= seen <= taken <= started


def test_the_stop_record_carries_the_time_the_driver_stopped(tmp_path):
    home = JobHome(str(tmp_path))
    home.write_spec({"job": "j", "version": "1"})
    stopped_at = "2026-11-26T10:00:00.500000+00:00"
    write_status(home.url, {"job": "j", "state": "STOPPED", "last_batch_id": 3, "stopped_at": stopped_at,
                            "heartbeat": stopped_at, "heartbeat_epoch": 0})
    complete_stop(home, True)
    record = [r for r in home.history() if r["operation"] == "stop"][-1]
    assert record["before"]["stopped_at"] == stopped_at


def test_stopping_a_driver_that_died_while_starting_is_nothing_to_stop_unless_a_savepoint_is_asked(tmp_path):
    # A new version that died right after it took the job (still STARTING, its process gone): a rollback's stop
    # must go on to the restore, not be refused.
    home = JobHome(str(tmp_path))
    home.write_spec({"job": "j", "version": "2"})
    write_status(home.url, {"job": "j", "state": "STARTING", "pid": 2 ** 22 + 12345, "jvm_pid": 2 ** 22 + 12346,
                            "host": socket.gethostname(),
                            "heartbeat": datetime.now(UTC).isoformat(), "heartbeat_epoch": time.time(),
                            "heartbeat_interval_seconds": 5})
    stopped = stop_job(home, timeout=5, savepoint=False, on_timeout="kill")
    assert (stopped.was_running, stopped.state) == (False, "STARTING")
    with pytest.raises(JobStateError, match="has not stopped"):
        stop_job(home, timeout=5, savepoint=True)
