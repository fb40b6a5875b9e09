"""Atomic writes: readers see the old file or the new one, and no stale Hadoop checksum survives."""

from __future__ import annotations

from airflow_kafka_stream.storage.files import url_to_fs, write_atomic


def test_write_atomic_replaces_the_file_and_drops_its_stale_crc(tmp_path):
    target = tmp_path / "offsets" / "5"
    target.parent.mkdir()
    target.write_text("old")
    crc = tmp_path / "offsets" / ".5.crc"
    crc.write_bytes(b"crc\x00stale")
    fs, path = url_to_fs(str(target))
    write_atomic(fs, path, "v1\nnew")
    assert target.read_text() == "v1\nnew"
    assert not crc.exists(), "Spark's checksummed read fails on a .crc that no longer matches"
    assert sorted(p.name for p in target.parent.iterdir()) == ["5"], "no temporary file is left behind"


def test_write_atomic_creates_missing_directories(tmp_path):
    fs, path = url_to_fs(str(tmp_path / "a" / "b" / "c.json"))
    write_atomic(fs, path, b"{}")
    assert (tmp_path / "a" / "b" / "c.json").read_bytes() == b"{}"
