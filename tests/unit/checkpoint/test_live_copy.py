"""The rules of a copy of a running checkpoint (core/live_copy.py) and the copy itself on crafted checkpoints.

The crafted checkpoints have the shapes Spark 4.2 writes (HDFS deltas and snapshots, RocksDB zips whose
``metadata`` lists SST files); the integration tests copy real running jobs.
"""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_kafka_stream.checkpoint.live_savepoint import copy_live_checkpoint, create_live_savepoint
from airflow_kafka_stream.checkpoint.savepoints import list_savepoints, read_manifest, validate_savepoint
from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.live_copy import (
    StaleCopy,
    changed_files,
    live_savepoint_refusal,
    log_files,
    other_state_file,
    rocksdb_shared_files,
    store_files,
)
from airflow_kafka_stream.core.savepoint_manifest import Manifest, parse_manifest, render_manifest
from airflow_kafka_stream.errors import JobStateError, SavepointError

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def test_log_files_take_the_batch_before_and_never_the_next_unless_asked():
    assert log_files(7, previous_exists=True) == ["commits/6", "offsets/6", "commits/7", "offsets/7"]
    assert log_files(7, previous_exists=False) == ["commits/7", "offsets/7"]
    assert log_files(0, previous_exists=True) == ["commits/0", "offsets/0"]
    assert log_files(7, True, next_offsets=True)[-1] == "offsets/8"
    assert "commits/8" not in log_files(7, True, next_offsets=True)


def test_hdfs_store_takes_the_newest_snapshot_at_or_below_and_the_deltas_after_it_nothing_later():
    names = ["1.delta", "2.delta", "3.delta", "3.snapshot", "4.delta", "5.delta", "6.delta", "6.snapshot", "7.delta",
             ".4.delta.crc", ".5.delta.abc.tmp"]
    chosen = store_files(names, 5, "state/0/0")
    assert chosen.files == ("3.snapshot", "4.delta", "5.delta") and chosen.rocksdb_base is None
    assert store_files(["1.delta", "2.delta"], 2, "s").files == ("1.delta", "2.delta")
    with pytest.raises(StaleCopy, match=r"\[4\]"):  # maintenance deleted a delta still needed
        store_files(["3.snapshot", "5.delta"], 5, "state/0/0")


def test_rocksdb_store_takes_the_newest_zip_and_changelogs_after_it():
    names = ["3.zip", "4.changelog", "5.changelog", "5.zip", "6.changelog", "7.zip", "SSTs"]
    assert store_files(names, 6, "s") == store_files(["5.zip", "6.changelog"], 6, "s")
    assert store_files(names, 6, "s").rocksdb_base == "5.zip"
    assert store_files(["9.zip", "10.zip"], 10, "s").files == ("10.zip",), "never a zip of a later version"
    with pytest.raises(SavepointError, match="checkpointFormatVersion"):
        store_files(["4_0a1b.zip"], 4, "s")


def test_rocksdb_metadata_lists_ssts_and_archived_logs():
    text = "v1\n" + json.dumps({"sstFiles": [{"localFileName": "000072.sst", "dfsSstFileName": "000072-a.sst",
                                              "sizeBytes": 1}],
                                 "logFiles": [{"localFileName": "000008.log", "dfsLogFileName": "000008-b.log",
                                               "sizeBytes": 2}], "numKeys": 3})
    assert rocksdb_shared_files(text, "z") == ["SSTs/000072-a.sst", "logs/000008-b.log"]
    assert rocksdb_shared_files('v1\n{"numKeys": 0}', "z") == []
    with pytest.raises(Exception, match="v2"):
        rocksdb_shared_files('v2\n{}', "z")


def test_other_state_files_are_metadata_and_schemas_not_shared_rocksdb_files():
    stores = ["state/0/0"]
    assert other_state_file("state/0/_metadata/metadata", stores)
    assert other_state_file("state/0/0/_metadata/schema", stores)
    assert not other_state_file("state/0/0/SSTs/000066-x.sst", stores)
    assert not other_state_file("state/0/0/4.delta", stores)
    assert not other_state_file("state/0/0/_metadata/.schema.crc", stores)


def test_changed_files_finds_vanished_and_resized_files():
    assert changed_files({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": None, "c": 4}) == ["b", "c"]
    assert changed_files({"a": 1}, {"a": 1}) == []


def test_only_a_running_job_without_a_stop_request_is_copied():
    assert live_savepoint_refusal(JobState.RUNNING, "RUNNING", stop_requested=False) is None
    draining = live_savepoint_refusal(JobState.DRAINING, "DRAINING", stop_requested=False)
    assert isinstance(draining, JobStateError) and "stopping" in str(draining)
    assert "stopping" in str(live_savepoint_refusal(JobState.RUNNING, "RUNNING", stop_requested=True))
    assert "STARTING" in str(live_savepoint_refusal(JobState.STARTING, "STARTING", stop_requested=False))
    assert live_savepoint_refusal(None, "WEIRD", stop_requested=False) is not None


def test_manifests_without_live_read_as_taken_at_a_stop():
    manifest = Manifest("sp-1", "q", 3, ('{"t":{"0":1}}',), HDFS, True, "1", datetime(2026, 1, 1, tzinfo=UTC),
                        files={"metadata": "x"}, live=True)
    assert parse_manifest(render_manifest(manifest)).live is True
    old = json.loads(render_manifest(manifest))
    del old["live"]
    assert parse_manifest(json.dumps(old)).live is False
    assert old["format_version"] == 1


# -- the copy, on crafted checkpoints ------------------------------------------------------------

def offsets_text(provider: str, offset: int) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {
        "spark.sql.streaming.stateStore.providerClass": provider, "spark.sql.shuffle.partitions": "1"}}
    return f"v1\n{json.dumps(meta)}\n{json.dumps({'t': {'0': offset}}, separators=(',', ':'))}"


def checkpoint(root: Path, provider: str, batches: range, in_flight: bool = True) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"q-1"}')
    for batch in batches:
        (root / "offsets" / str(batch)).write_text(offsets_text(provider, batch * 10))
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    if in_flight:
        (root / "offsets" / str(batches[-1] + 1)).write_text(offsets_text(provider, 999))
    meta = root / "state" / "0" / "_metadata"
    meta.mkdir(parents=True)
    (meta / "metadata").write_text("v1\n{}")
    return root


def rocksdb_zip(ssts: list[str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("CURRENT", "MANIFEST-000005\n")
        archive.writestr("metadata", "v1\n" + json.dumps({"sstFiles": [
            {"localFileName": name.split("-")[0] + ".sst", "dfsSstFileName": name, "sizeBytes": 4} for name in ssts],
            "numKeys": 1}))
    return buffer.getvalue()


def test_hdfs_copy_holds_what_batch_n_needs_and_nothing_of_later_batches(tmp_path):
    root = checkpoint(tmp_path / "cp", HDFS, range(0, 6))
    store = root / "state" / "0" / "0"
    store.mkdir()
    for version in range(1, 8):  # version 7 was written by the batch in flight
        (store / f"{version}.delta").write_text(f"d{version}")
    (store / "4.snapshot").write_text("snap4")
    (store / "7.snapshot").write_text("snap7")
    made = copy_live_checkpoint(str(root), str(tmp_path / "copy"))
    assert (made.batch_id, made.state_version, made.query_id, made.attempts) == (5, 6, "q-1", 1)
    assert sorted(made.files) == ["commits/4", "commits/5", "metadata", "offsets/4", "offsets/5",
                                  "state/0/0/4.snapshot", "state/0/0/5.delta", "state/0/0/6.delta",
                                  "state/0/_metadata/metadata"]
    assert made.offsets.source_lines == ('{"t":{"0":50}}',)
    rehearsal = copy_live_checkpoint(str(root), str(tmp_path / "rehearsal"), batch_id=4, next_offsets=True)
    assert "offsets/5" in rehearsal.files and "commits/5" not in rehearsal.files
    assert {"state/0/0/4.snapshot", "state/0/0/5.delta"} == {f for f in rehearsal.files if "/0/0/" in f}
    assert rehearsal.next_offsets is not None and rehearsal.next_offsets.source_lines == ('{"t":{"0":50}}',)
    with pytest.raises(JobStateError, match="not committed"):
        copy_live_checkpoint(str(root), str(tmp_path / "late"), batch_id=5, next_offsets=True)
    assert not (tmp_path / "late").exists()


def test_rocksdb_copy_takes_only_the_ssts_its_base_lists(tmp_path):
    root = checkpoint(tmp_path / "cp", ROCKSDB, range(0, 3))
    store = root / "state" / "0" / "0"
    (store / "SSTs").mkdir(parents=True)
    for name in ("000001-a.sst", "000002-b.sst", "000003-c.sst"):
        (store / "SSTs" / name).write_text("ssts")
    (store / "3.zip").write_bytes(rocksdb_zip(["000001-a.sst", "000002-b.sst"]))
    (store / "4.zip").write_bytes(rocksdb_zip(["000003-c.sst"]))  # the batch in flight's
    made = copy_live_checkpoint(str(root), str(tmp_path / "copy"))
    state = sorted(f for f in made.files if f.startswith("state/0/0/"))
    assert state == ["state/0/0/3.zip", "state/0/0/SSTs/000001-a.sst", "state/0/0/SSTs/000002-b.sst"]


def test_a_file_deleted_mid_copy_is_retried_and_never_left_half_made(tmp_path):
    root = checkpoint(tmp_path / "cp", HDFS, range(0, 3), in_flight=False)
    store = root / "state" / "0" / "0"
    store.mkdir()
    for version in range(1, 4):
        (store / f"{version}.delta").write_text(f"d{version}")
    savepoints = tmp_path / "savepoints"
    steps: list[str] = []

    def maintenance(step: str) -> None:  # the first attempt loses a delta; Spark then wrote a snapshot
        steps.append(step)
        if step == "listed" and steps.count("listed") == 1:
            (store / "3.snapshot").write_text("snap3")
            (store / "2.delta").unlink()

    manifest = create_live_savepoint(str(root), lambda batch: str(savepoints / f"sp-b{batch}"), "1",
                                     datetime.now(UTC), step_hook=maintenance)
    assert "failed:1" in steps and steps[-1] == "manifest"
    assert manifest.live and "state/0/0/3.snapshot" in manifest.files and "state/0/0/2.delta" not in manifest.files
    assert [m.savepoint_id for m in list_savepoints(str(savepoints))] == ["sp-b2"]
    assert validate_savepoint(str(savepoints / "sp-b2")).live
    assert read_manifest(str(savepoints / "sp-b2")).batch_id == 2


def test_a_copy_that_always_races_is_refused_with_nothing_left(tmp_path):
    root = checkpoint(tmp_path / "cp", HDFS, range(0, 3), in_flight=False)
    store = root / "state" / "0" / "0"
    store.mkdir()
    for version in range(1, 4):
        (store / f"{version}.delta").write_text(f"d{version}")
    hidden = tmp_path / "hidden"

    def vanish(step: str) -> None:  # a file disappears after the listing, and comes back after the attempt
        if step == "listed":
            (store / "2.delta").rename(hidden)
        elif step.startswith("failed:"):
            hidden.rename(store / "2.delta")

    savepoints = tmp_path / "savepoints"
    with pytest.raises(SavepointError, match="minBatchesToRetain"):
        create_live_savepoint(str(root), lambda batch: str(savepoints / f"sp-b{batch}"), "1", datetime.now(UTC),
                              attempts=2, step_hook=vanish)
    assert not savepoints.exists() or list(savepoints.iterdir()) == []


def test_a_checkpoint_without_a_committed_batch_is_refused(tmp_path):
    root = tmp_path / "cp"
    (root / "offsets").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"q-1"}')
    (root / "offsets" / "0").write_text(offsets_text(HDFS, 0))
    with pytest.raises(JobStateError, match="not committed a batch"):
        copy_live_checkpoint(str(root), str(tmp_path / "copy"))
    assert not (tmp_path / "copy").exists()
