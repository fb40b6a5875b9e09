"""fsck rules over listings and bytes (pure)."""

from __future__ import annotations

import struct
import zlib

import pytest

from airflow_kafka_stream.core.checkpoint_fsck import (
    FsckReport,
    Severity,
    commits_without_offsets,
    crc_findings,
    crc_problem,
    crc_target,
    gaps,
    interrupted_operations,
    leftover_temp_files,
    unparseable_files,
)


def hadoop_crc(data: bytes, chunk: int = 512) -> bytes:
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i : i + chunk])) for i in range(0, len(data), chunk))
    return b"crc\0" + struct.pack(">i", chunk) + sums


# Bytes of a real Spark 4.2 checkpoint: commits/3 and its .3.crc.
REAL_COMMIT = b'v1\n{"nextBatchWatermarkMs":0}'
REAL_COMMIT_CRC = bytes.fromhex("6372630000000200f32abfdd")


@pytest.mark.parametrize(
    ("data", "crc", "problem"),
    [
        pytest.param(REAL_COMMIT, REAL_COMMIT_CRC, None, id="real-spark-crc-matches"),
        pytest.param(b"x" * 1500, hadoop_crc(b"x" * 1500), None, id="three-chunks"),
        pytest.param(b"", hadoop_crc(b""), None, id="empty-file"),
        pytest.param(REAL_COMMIT + b" ", REAL_COMMIT_CRC, "does not match", id="file-changed"),
        pytest.param(REAL_COMMIT, b"nope" + REAL_COMMIT_CRC[4:], "bad magic", id="not-a-crc-file"),
        pytest.param(b"x" * 600, hadoop_crc(b"x" * 512), "does not match", id="missing-chunk-sum"),
    ],
)
def test_crc_problem(data, crc, problem):
    result = crc_problem(data, crc)
    assert (result is None) if problem is None else (problem in result)


@pytest.mark.parametrize(
    ("name", "target"),
    [
        pytest.param(".3.crc", "3", id="log-crc"),
        pytest.param(".1.delta.crc", "1.delta", id="state-crc"),
        pytest.param("3", None, id="data-file"),
        pytest.param(".crc", None, id="bare-suffix"),
    ],
)
def test_crc_target(name, target):
    assert crc_target(name) == target


@pytest.mark.parametrize(
    ("offsets", "commits", "errors"),
    [
        pytest.param(["0", "1"], ["0", "1"], [], id="aligned"),
        pytest.param(["0", "1", "2"], ["0", "1"], [], id="in-flight-is-fine"),
        pytest.param(["0", "1"], ["0", "1", "2"], ["/c/commits/2"], id="commit-ahead"),
    ],
)
def test_commits_without_offsets(offsets, commits, errors):
    assert [f.path for f in commits_without_offsets(offsets, commits, "/c")] == errors


@pytest.mark.parametrize(
    ("names", "count"),
    [
        pytest.param(["5", "6", "7"], 0, id="contiguous-after-purge"),
        pytest.param(["5", "7", ".6.crc"], 1, id="hole-in-the-middle"),
        pytest.param([], 0, id="empty"),
    ],
)
def test_gaps(names, count):
    assert len(gaps(names, "/c/offsets")) == count


def test_temp_files_are_warnings_and_crc_orphans_too():
    temp = leftover_temp_files(["/c/offsets/.4.abc.tmp", "/c/offsets/4"])
    assert [(f.severity, f.path) for f in temp] == [(Severity.WARNING, "/c/offsets/.4.abc.tmp")]
    crc = crc_findings({"/c/offsets/.9.crc": "missing", "/c/offsets/.3.crc": "checksum does not match", "/x": None})
    assert [(f.severity, f.path) for f in crc] == [
        (Severity.ERROR, "/c/offsets/.3.crc"),
        (Severity.WARNING, "/c/offsets/.9.crc"),
    ]


def test_report_ok_only_without_errors():
    findings = tuple(unparseable_files({"/c/offsets/3": "bad"}) + interrupted_operations("/c", False, False))
    assert not FsckReport("/c", findings).ok
    assert "1 error(s)" in FsckReport("/c", findings).render()
    assert FsckReport("/c", tuple(leftover_temp_files(["/c/.x.tmp"]))).ok, "warnings alone do not fail"
    assert len(interrupted_operations("/c", True, True)) == 2
