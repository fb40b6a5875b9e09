"""Copying and hashing in bounded chunks: the same digest as hashing the whole file, whole copies only."""

from __future__ import annotations

import hashlib
import io
import os
from types import SimpleNamespace

import fsspec
import pytest

from airflow_kafka_stream.checkpoint import file_copy
from airflow_kafka_stream.core.savepoint_manifest import sha256

DATA = bytes(range(256)) * 41 + b"tail"  # 10500 bytes: not a multiple of the chunk size


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(file_copy, "CHUNK_BYTES", 1000)


def test_sha256_of_chunks_is_the_sha256_of_their_concatenation():
    assert sha256([DATA[:7], DATA[7:5000], b"", DATA[5000:]]) == sha256(DATA) == hashlib.sha256(DATA).hexdigest()


def test_copy_and_hash_locally(tmp_path):
    fs = fsspec.filesystem("file")
    (tmp_path / "src").write_bytes(DATA)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".copy.crc").write_bytes(b"stale")
    digest = file_copy.copy_file(fs, str(tmp_path / "src"), fs, str(tmp_path / "out" / "copy"))
    assert digest == sha256(DATA) == file_copy.hash_file(fs, str(tmp_path / "out" / "copy"))
    assert (tmp_path / "out" / "copy").read_bytes() == DATA
    assert os.listdir(tmp_path / "out") == ["copy"], "no temporary file, and Hadoop's stale checksum is gone"


def test_copy_to_an_object_store_shape(tmp_path):
    memory = fsspec.filesystem("memory")
    (tmp_path / "src").write_bytes(DATA)
    digest = file_copy.copy_file(fsspec.filesystem("file"), str(tmp_path / "src"), memory, "/bucket/copy")
    assert digest == sha256(DATA) and memory.cat_file("/bucket/copy") == DATA


class FailingRead:
    """A source that breaks after its first chunk (a network read that fails half-way)."""

    def __init__(self) -> None:
        self.calls = 0

    def read(self, size: int) -> bytes:
        self.calls += 1
        if self.calls > 1:
            raise OSError("connection reset")
        return DATA[:size]


def test_a_copy_that_fails_half_way_leaves_no_target(tmp_path):
    target = tmp_path / "out" / "copy"
    with pytest.raises(OSError, match="connection reset"):
        file_copy._copy_local(FailingRead(), str(target))
    assert os.listdir(tmp_path / "out") == []


def test_a_paced_copy_rests_in_proportion_to_its_work_and_copies_the_same_bytes(tmp_path, monkeypatch):
    """A copy of a running job's checkpoint works ``share`` of its time: after each chunk and after the file it
    sleeps (1 - share) / share of the work since its last rest."""
    clock = {"now": 0.0}
    slept: list[float] = []
    monkeypatch.setattr(file_copy, "time", SimpleNamespace(monotonic=lambda: clock["now"], sleep=slept.append))
    monkeypatch.setattr(file_copy, "CHUNK_BYTES", 4)
    reads = iter([0.2, 0.2, 0.0])

    class Timed(io.BytesIO):
        def read(self, size: int = -1) -> bytes:
            clock["now"] += next(reads)  # each read is work that takes time
            return super().read(size)

    fs = fsspec.filesystem("file")
    monkeypatch.setattr(fs, "open", lambda path, mode="rb": Timed(b"12345678"))
    pace = file_copy.Pace(1 / 3)
    digest = file_copy.copy_file(fs, "/checkpoint/state/1.delta", fsspec.filesystem("file"), str(tmp_path / "copy"),
                                 pace)
    assert (tmp_path / "copy").read_bytes() == b"12345678" and digest == hashlib.sha256(b"12345678").hexdigest()
    assert [round(s, 6) for s in slept] == [0.4, 0.4, 0.0], "twice each chunk's work, at a third; then the close"
    assert round(pace.rested, 6) == 0.8
    assert file_copy.UNPACED.rested == 0.0


@pytest.mark.parametrize("share", [0.0, 1.5, -1.0])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(ValueError, match="share of the time"):
        file_copy.Pace(share)


def test_a_live_copy_that_raced_the_jobs_cleanup_works_a_larger_share_at_each_next_attempt(tmp_path, monkeypatch):
    """A gentle copy must never make a savepoint impossible: a job that keeps only a few batches purges them
    before a quarter-paced copy ends, so each next attempt works twice the share, up to all of its time."""
    from airflow_kafka_stream.checkpoint import live_savepoint
    from airflow_kafka_stream.core.live_copy import StaleCopy

    shares: list[float] = []

    def attempt(fs, root, target_fs, target, batch, next_offsets, hook, pace):
        shares.append(pace.share)
        if len(shares) < 4:
            raise StaleCopy("commits/3 vanished while it was copied")
        return {}, {}

    monkeypatch.setattr(live_savepoint, "_batch_to_copy", lambda *args: 3)
    monkeypatch.setattr(live_savepoint, "_attempt", attempt)
    monkeypatch.setattr(live_savepoint, "_finished", lambda *args: "copied")
    made = live_savepoint.copy_live_checkpoint(str(tmp_path / "checkpoint"), str(tmp_path / "copy"), share=0.25,
                                               retry_pause=0)
    assert made == "copied" and shares == [0.25, 0.5, 1.0, 1.0]
