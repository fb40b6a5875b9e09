"""read_position on synthesized local checkpoints: purged logs, batches in flight, broken logs."""

from __future__ import annotations

import os

import pytest

from airflow_kafka_stream.checkpoint.fsck import fsck
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.errors import CheckpointFormatError

pytestmark = pytest.mark.integration

META = '{"batchWatermarkMs":5,"batchTimestampMs":7,"conf":{}}'


def write_log(root, offsets: range, commits: range) -> None:
    (root / "metadata").write_text('{"id":"q1"}')
    for directory, batches in (("offsets", offsets), ("commits", commits)):
        (root / directory).mkdir(exist_ok=True)
        for batch in batches:
            text = (
                f'v1\n{META}\n{{"t": {{"0": {batch}}}}}' if directory == "offsets" else 'v1\n{"nextBatchWatermarkMs":5}'
            )
            (root / directory / str(batch)).write_text(text)


@pytest.mark.parametrize(
    ("offsets", "commits", "committed", "in_flight"),
    [
        pytest.param(range(0, 5), range(0, 5), 4, None, id="young-checkpoint"),
        pytest.param(range(900, 1001), range(900, 1000), 999, 1000, id="purged-bottom-with-batch-in-flight"),
        pytest.param(range(0, 1), range(0, 0), None, 0, id="first-batch-in-flight"),
    ],
)
def test_read_position(tmp_path, offsets, commits, committed, in_flight):
    write_log(tmp_path, offsets, commits)
    position = read_position(str(tmp_path))
    assert (position.query_id, position.batch_id, position.in_flight_batch_id) == ("q1", committed, in_flight)
    if committed is not None:
        assert position.source_offsets(0) == {("t", 0): committed}
        assert (position.watermark_ms, position.timestamp_ms, position.stateful) == (5, 7, False)
    assert fsck(str(tmp_path)).ok


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        pytest.param(lambda root: os.remove(root / "metadata"), "no 'metadata'", id="no-metadata"),
        pytest.param(lambda root: os.remove(root / "offsets" / "4"), "runs ahead", id="commit-ahead"),
        pytest.param(lambda root: (root / "offsets" / "4").write_text("garbage"), "log version", id="garbage"),
    ],
)
def test_broken_checkpoints_are_named(tmp_path, damage, needle):
    write_log(tmp_path, range(0, 5), range(0, 5))
    damage(tmp_path)
    with pytest.raises(CheckpointFormatError, match=needle):
        read_position(str(tmp_path))
    assert not fsck(str(tmp_path)).ok
