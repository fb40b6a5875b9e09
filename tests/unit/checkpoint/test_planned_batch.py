"""Withdrawing a batch Spark planned but never ran: only the checkpoint's batch in flight, never a committed one."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_kafka_stream.checkpoint.planned_batch import withdraw_planned_batch
from airflow_kafka_stream.checkpoint.reader import read_position

OFFSET_METADATA = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1700000000000, "conf": {}})


def checkpoint(root: Path, committed: int, planned: int | None) -> str:
    """A checkpoint of one Kafka source with batches 0..``committed`` committed and ``planned`` in flight."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": "6a0c3e0e-1f7e-4a51-9d1e-3d2c0f1e2a3b"}))
    for batch in range(committed + 1 if planned is None else planned + 1):
        (root / "offsets" / str(batch)).write_text(f'v1\n{OFFSET_METADATA}\n{{"t":{{"0":{batch * 10}}}}}')
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc")
        if batch <= committed:
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return str(root)


def test_the_batch_in_flight_is_withdrawn_with_its_checksum(tmp_path):
    url = checkpoint(tmp_path / "c", committed=2, planned=3)
    assert withdraw_planned_batch(url, 3) is True
    assert sorted(p.name for p in (tmp_path / "c" / "offsets").iterdir()) == [".0.crc", ".1.crc", ".2.crc",
                                                                              "0", "1", "2"]
    position = read_position(url)
    assert (position.batch_id, position.in_flight_batch_id) == (2, None)


def test_a_committed_batch_or_another_batch_is_left_alone(tmp_path):
    url = checkpoint(tmp_path / "c", committed=2, planned=3)
    assert withdraw_planned_batch(url, 2) is False  # committed: it ran
    assert withdraw_planned_batch(url, 4) is False  # not the batch in flight
    assert read_position(url).in_flight_batch_id == 3
    clean = checkpoint(tmp_path / "d", committed=2, planned=None)
    assert withdraw_planned_batch(clean, 3) is False
    assert withdraw_planned_batch(str(tmp_path / "fresh"), 0) is False  # a checkpoint not started yet
