"""Copying and hashing in bounded chunks: the same digest as hashing the whole file, whole copies only."""

from __future__ import annotations

import hashlib
import os

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
