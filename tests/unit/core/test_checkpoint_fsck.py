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
    missing_partitions,
    missing_ssts,
    rocksdb_zip_ssts,
    state_load,
    state_version_file,
    unparseable_files,
    unrebuildable_state,
)
from airflow_kafka_stream.render.checkpoint import fsck_text


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
    assert "1 error(s)" in fsck_text(FsckReport("/c", findings))
    assert FsckReport("/c", tuple(leftover_temp_files(["/c/.x.tmp"]))).ok, "warnings alone do not fail"
    assert len(interrupted_operations("/c", True, True)) == 2


# -- state stores (rules 7-9) -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("names", "version", "base", "replay", "missing"),
    [
        pytest.param(["1.delta", "2.delta", "3.delta"], 3, None, ("1.delta", "2.delta", "3.delta"), (),
                     id="hdfs-deltas-from-empty"),
        pytest.param(["4.delta", "6.delta", "6.snapshot", "7.delta", "8.delta", "9.delta"], 9, "6.snapshot",
                     ("7.delta", "8.delta", "9.delta"), (), id="hdfs-newest-snapshot-then-deltas"),
        pytest.param(["6.snapshot", "7.delta", "9.delta"], 9, "6.snapshot", ("7.delta", "9.delta"), (8,),
                     id="hdfs-gap-after-snapshot"),
        pytest.param(["4.delta", "7.delta", "8.delta", "9.delta"], 9, None, ("4.delta", "7.delta", "8.delta",
                     "9.delta"), (1, 2, 3, 5, 6), id="snapshot-lost-after-purge-no-older-base"),
        pytest.param(["9.snapshot", "8.delta"], 9, "9.snapshot", (), (), id="snapshot-at-the-version-is-enough"),
        pytest.param(["8.zip", "9.zip"], 9, "9.zip", (), (), id="rocksdb-zip-per-version"),
        pytest.param(["8.zip"], 9, "8.zip", (), (9,), id="rocksdb-newest-zip-lost"),
        pytest.param(["6.zip", "6.changelog", "7.changelog", "8.changelog", "9.changelog"], 9, "6.zip",
                     ("7.changelog", "8.changelog", "9.changelog"), (), id="changelog-replay"),
        pytest.param(["10.delta", "11.delta"], 9, None, (), tuple(range(1, 10)), id="files-above-the-version-ignored"),
    ],
)
def test_state_load(names, version, base, replay, missing):
    load = state_load(names, version)
    assert (load.base_name, load.replay, load.missing) == (base, replay, missing)


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        pytest.param("12.delta", (12, "delta", False), id="delta"),
        pytest.param("7.zip", (7, "zip", False), id="zip"),
        pytest.param("7_0f1e2d3c-aaaa-bbbb-cccc-000000000000.changelog", (7, "changelog", True), id="format-v2"),
        pytest.param(".7.zip.crc", None, id="crc"),
        pytest.param("schema", None, id="other"),
    ],
)
def test_state_version_file(name, parsed):
    assert state_version_file(name) == parsed


@pytest.mark.parametrize(
    ("names", "severity", "text"),
    [
        pytest.param(["8.delta", "9.delta", "9.snapshot"], None, None, id="fit"),
        pytest.param(["6.snapshot", "7.delta", "9.delta"], Severity.ERROR, "8.delta is missing",
                     id="hdfs-delta-named"),
        pytest.param(["8.zip"], Severity.ERROR, "9.zip is missing and there are no changelog files",
                     id="rocksdb-without-changelog-names-the-zip"),
        pytest.param(["8.zip", "8.changelog"], Severity.ERROR, "9.changelog is missing", id="changelog-named"),
        pytest.param(["9_0f1e2d3c.zip"], Severity.WARNING, "format version 2", id="v2-not-judged-as-fit"),
    ],
)
def test_unrebuildable_state(names, severity, text):
    findings = unrebuildable_state("cp/state/0/0", names, 9)
    if severity is None:
        assert findings == []
    else:
        assert [f.severity for f in findings] == [severity]
        assert text in findings[0].message


def test_missing_partitions_and_ssts():
    assert missing_partitions("cp/state/0", [0, 1], 2) == []
    assert missing_partitions("cp/state/0", [0], None) == []  # count unknown: nothing to compare
    (finding,) = missing_partitions("cp/state/0", [0, 2], 4)
    assert finding.severity is Severity.ERROR and "[1, 3] of 4" in finding.message
    assert missing_ssts("s", "9.zip", ["a.sst"], ["a.sst", "b.sst"]) == []
    (finding,) = missing_ssts("s", "9.zip", ["a.sst", "b.sst"], ["a.sst"])
    assert "9.zip lists" in finding.message and "b.sst" in finding.message


def test_rocksdb_zip_ssts_reads_the_metadata_spark_writes():
    import io
    import zipfile

    # The metadata member of a real Spark 4.2 RocksDB 9.zip (shortened to two SST files).
    metadata = ('v1\n{"sstFiles":[{"localFileName":"000008.sst","dfsSstFileName":"000008-ae92.sst","sizeBytes":1203},'
                '{"localFileName":"000016.sst","dfsSstFileName":"000016-bfbf.sst","sizeBytes":1203}],"numKeys":1}')
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("CURRENT", "MANIFEST-000013\n")
        archive.writestr("metadata", metadata)
    assert rocksdb_zip_ssts(buffer.getvalue()) == ["000008-ae92.sst", "000016-bfbf.sst"]
