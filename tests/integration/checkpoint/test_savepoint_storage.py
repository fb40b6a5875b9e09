"""Savepoints of real Spark checkpoints, locally and on S3 (moto): create, validate, restore, prune."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta

import fsspec
import pytest

from airflow_kafka_stream.checkpoint.fsck import fsck
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.savepoints import (
    create_savepoint,
    incomplete_savepoints,
    list_savepoints,
    prune_savepoints,
    restore_savepoint,
    sink_batch_log,
    validate_savepoint,
)
from airflow_kafka_stream.checkpoint.writer import append_batch
from airflow_kafka_stream.errors import CheckpointFormatError, JobStateError, SavepointError
from tests.integration.checkpoint.test_checkpoint_append import rate_line, run_count, run_stateless

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def stateful_checkpoint(spark, tmp_path):
    checkpoint = str(tmp_path / "stateful")
    for _ in range(3):
        run_count(spark, checkpoint)
    return checkpoint


@pytest.fixture
def s3_root(s3_server, request):
    return f"s3://{s3_server['bucket']}/{request.node.name}", s3_server["storage_options"]


def test_stateful_savepoint_on_s3_restores_and_counts_continue(spark, tmp_path, stateful_checkpoint, s3_root):
    root, options = s3_root
    manifest = create_savepoint(stateful_checkpoint, f"{root}/sp-1", "1.0", T0, spark.version, options)
    assert (manifest.batch_id, manifest.stateful, manifest.spark_version) == (2, True, spark.version)
    assert {"metadata", "offsets/1", "commits/1", "offsets/2", "commits/2", "state/0/0/3.delta"} <= set(manifest.files)
    assert not any(path.endswith(".crc") for path in manifest.files)
    assert [m.savepoint_id for m in list_savepoints(root, options)] == ["sp-1"]
    run_count(spark, stateful_checkpoint)  # the original moves on; the savepoint must not
    restored = str(tmp_path / "restored")
    restore_savepoint(f"{root}/sp-1", restored, options)
    assert fsck(restored).ok
    assert run_count(spark, restored) == [(3, 40, 0, 39)], "state and offsets exactly as at the savepoint"


def test_stateless_restore_reads_from_savepoint_offsets(spark, tmp_path):
    checkpoint, restored = str(tmp_path / "ck"), str(tmp_path / "restored")
    for _ in range(2):
        run_stateless(spark, checkpoint)
    append_batch(checkpoint, source_line=rate_line(300))
    manifest = create_savepoint(checkpoint, str(tmp_path / "sp" / "a"), "1", T0)
    assert manifest.source_lines == (rate_line(300),)
    restore_savepoint(str(tmp_path / "sp" / "a"), restored)
    assert run_stateless(spark, restored) == [(3, 300, 309)]


def test_tampered_file_fails_validation_and_restore(tmp_path, stateful_checkpoint):
    savepoint = str(tmp_path / "sp" / "x")
    create_savepoint(stateful_checkpoint, savepoint, "1", T0)
    with open(os.path.join(savepoint, "state", "0", "1", "3.delta"), "ab") as handle:
        handle.write(b"!")
    with pytest.raises(SavepointError, match="3.delta: sha256"):
        validate_savepoint(savepoint)
    with pytest.raises(SavepointError):
        restore_savepoint(savepoint, str(tmp_path / "new"))
    assert not os.path.exists(tmp_path / "new"), "a failed validation writes nothing"


def test_refusals(tmp_path, stateful_checkpoint):
    savepoint = str(tmp_path / "sp" / "x")
    create_savepoint(stateful_checkpoint, savepoint, "1", T0)
    with pytest.raises(SavepointError, match="never overwritten"):
        create_savepoint(stateful_checkpoint, savepoint, "1", T0)
    with pytest.raises(JobStateError, match="not empty"):
        restore_savepoint(savepoint, stateful_checkpoint)
    os.remove(os.path.join(stateful_checkpoint, "commits", "2"))
    with pytest.raises(JobStateError, match="in flight"):
        create_savepoint(stateful_checkpoint, str(tmp_path / "sp" / "y"), "1", T0)


def test_prune_applies_retention_and_removes_incomplete(tmp_path, stateful_checkpoint):
    root = str(tmp_path / "sp")
    for day in range(1, 5):
        create_savepoint(stateful_checkpoint, f"{root}/d{day}", "1", T0 + timedelta(days=day))
    os.makedirs(f"{root}/broken/state")  # an interrupted create: no manifest
    assert incomplete_savepoints(root) == ["broken"]
    deleted = prune_savepoints(root, now=T0 + timedelta(days=5), keep_last=2)
    assert deleted == ["broken", "d1", "d2"]
    assert [m.savepoint_id for m in list_savepoints(root)] == ["d3", "d4"]


def test_drop_state_helpers(tmp_path, spark):
    checkpoint, sink = str(tmp_path / "ck"), str(tmp_path / "out")
    run_stateless(spark, checkpoint, sink)
    assert sink_batch_log(sink) and not sink_batch_log(str(tmp_path))
    append_batch(checkpoint, source_line='{"t":{"0":4}}', sink_metadata_path=sink)
    manifest = create_savepoint(checkpoint, str(tmp_path / "sp" / "k"), "1", T0)
    assert manifest.source_offsets(0) == {("t", 0): 4}


def test_reader_and_fsck_on_s3(s3_root, stateful_checkpoint):
    root, options = s3_root
    fs = fsspec.filesystem("s3", **options)
    fs.put(stateful_checkpoint, f"{root}/ck".removeprefix("s3://"), recursive=True)
    position = read_position(f"{root}/ck", options)
    assert (position.batch_id, position.stateful, position.stateful_operators[0].name) == (2, True, "stateStoreSave")
    assert fsck(f"{root}/ck", options).ok
    append_batch(f"{root}/ck", source_line=rate_line(9), storage_options=options)
    assert read_position(f"{root}/ck", options).offsets.source_value(0)["offset"] == 9
    fs.pipe(f"{root}/ck/offsets/.2.crc".removeprefix("s3://"), b"crc\0\0\0\2\0\0\0\0\0")
    assert not fsck(f"{root}/ck", options).ok, "a wrong checksum is an error"


class Crash(Exception):
    pass


def crash_at(target: str):
    def hook(step: str) -> None:
        if step == target:
            raise Crash(step)

    return hook


def test_create_crash_at_every_step_leaves_no_visible_savepoint(tmp_path, stateful_checkpoint):
    steps: list[str] = []
    create_savepoint(stateful_checkpoint, str(tmp_path / "probe"), "1", T0, step_hook=steps.append)
    root = str(tmp_path / "sp")
    for number, step in enumerate(steps[:-1]):
        with pytest.raises(Crash):
            create_savepoint(stateful_checkpoint, f"{root}/c{number}", "1", T0, step_hook=crash_at(step))
        assert list_savepoints(root) == []
    assert fsck(stateful_checkpoint).ok, "the checkpoint itself is untouched"
    assert len(prune_savepoints(root, now=T0)) == len(steps) - 1
    assert os.listdir(root) == []


def test_restore_crash_at_every_step_is_refused_then_redone(spark, tmp_path, stateful_checkpoint):
    savepoint = str(tmp_path / "sp" / "r")
    create_savepoint(stateful_checkpoint, savepoint, "1", T0)
    steps: list[str] = []
    restore_savepoint(savepoint, str(tmp_path / "probe"), step_hook=steps.append)
    for number, step in enumerate(steps[:-1]):
        target = str(tmp_path / f"new{number}")
        with pytest.raises(Crash):
            restore_savepoint(savepoint, target, step_hook=crash_at(step))
        with pytest.raises(CheckpointFormatError, match="restore .* did not finish"):
            read_position(target)
        assert not fsck(target).ok
        restore_savepoint(savepoint, target)
        assert fsck(target).ok
        if number:
            shutil.rmtree(target)
    assert run_count(spark, str(tmp_path / "new0")) == [(3, 40, 0, 39)], "a redone restore runs"
