"""ops.health.HealthLook against a real (local) job home: a run with no batch yet is measured from its start.

A drop-state upgrade's gate once passed a generation whose first batch was still running: with no batch, its lag
read 0, and a window of "lag 0" is the rule for a job with no input. The watermarks were fakes here (records
arrived after the seed); the job home, its generation record and the status are the real files.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from airflow_kafka_stream.core.health import HealthSpec
from airflow_kafka_stream.ops import health
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import write_status

SEED = {"t": {"0": 5, "1": 2}}


def running(home: JobHome, generation: int, **more) -> None:
    now = datetime.now(UTC)
    write_status(home.url, {"state": "RUNNING", "generation": generation, "checkpoint": home.checkpoint_url(generation),
                            "batches_this_run": 0, "last_batch_id": None, "last_offsets": None,
                            "heartbeat_epoch": now.timestamp(), "heartbeat": now.isoformat(),
                            "started_at": now.isoformat(), "pid": 1, **more})


def gate(tmp_path, monkeypatch, highs: dict, start_offsets=SEED) -> list[dict]:
    """Three looks a little over a second apart (the shortest window) at a seeded generation with no batch."""
    home = JobHome(str(tmp_path))
    generation, _url = home.new_generation("restore-drop-state", start_offsets=start_offsets, from_savepoint="sp-1")
    monkeypatch.setattr(health, "partition_highs", lambda config, offsets: highs)
    look = health.HealthLook(home, {"bootstrap.servers": "unused:9092"},
                             HealthSpec(2, 0, newer_than=datetime.now(UTC) - timedelta(minutes=1)), 60)
    verdicts = []
    for _ in range(3):
        running(home, generation)
        verdicts.append(look())
        time.sleep(0.6)
    return verdicts


def test_records_since_the_seed_keep_a_generation_with_no_batch_from_healthy(tmp_path, monkeypatch):
    verdicts = gate(tmp_path, monkeypatch, {("t", 0): 30, ("t", 1): 25})
    assert [v["status"] for v in verdicts] == ["waiting"] * 3, verdicts
    assert verdicts[-1]["lag"] == [48, 48, 48], "the lag counts from the seeded offsets, not 0"


def test_watermarks_at_the_seed_prove_no_input(tmp_path, monkeypatch):
    verdicts = gate(tmp_path, monkeypatch, {("t", 0): 5, ("t", 1): 2})
    assert verdicts[-1]["status"] == "success" and "no input arrived" in verdicts[-1]["message"], verdicts[-1]


def test_an_unknown_start_proves_nothing(tmp_path, monkeypatch):
    verdicts = gate(tmp_path, monkeypatch, {}, start_offsets="latest")
    assert [v["status"] for v in verdicts] == ["waiting"] * 3, verdicts
    assert verdicts[-1]["lag"] == [None, None, None]
