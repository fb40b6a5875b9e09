"""A savepoint of a running job is refused, with its reason and nothing written, while the job starts,
drains or was asked to stop, and before it committed a batch (statuses as a driver on another host
writes them: judged by the heartbeat alone)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.ops import savepoints
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import write_status


def running_home(tmp_path: Path, state: str) -> JobHome:
    home = tmp_path / "home"
    home.mkdir()
    (home / "job.json").write_text(json.dumps({"job": "home", "topics": ["t"], "group": "g", "version": "1"}))
    job = JobHome(str(home))
    job.new_generation("submit", start_offsets="earliest")
    write_status(str(home), {"state": state, "host": "another-host", "pid": 1, "heartbeat_epoch": time.time(),
                             "heartbeat": "now", "application_id": "app-1"})
    return job


def refused(job: JobHome, match: str) -> None:
    with pytest.raises(JobStateError, match=match):
        savepoints.create(job)
    assert not (Path(job.url) / "savepoints").exists() or list((Path(job.url) / "savepoints").iterdir()) == []
    record = job.history()[-1]
    assert (record["operation"], record["result"]) == ("savepoint-create", "refused")
    assert not (Path(job.url) / "lock").exists()


@pytest.mark.parametrize(("state", "match"), [("STARTING", "STARTING"), ("DRAINING", "stopping")])
def test_starting_and_draining_jobs_are_refused(tmp_path, state, match):
    refused(running_home(tmp_path, state), match)


def test_a_running_job_asked_to_stop_is_refused(tmp_path):
    job = running_home(tmp_path, "RUNNING")
    job.request_stop(by="someone")
    refused(job, "stopping")


def test_a_running_job_without_a_committed_batch_is_refused(tmp_path):
    refused(running_home(tmp_path, "RUNNING"), "not committed a batch")
