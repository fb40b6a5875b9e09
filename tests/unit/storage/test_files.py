"""Atomic writes: readers see the old file or the new one, and no stale Hadoop checksum survives."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.errors import InvalidInputError
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


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        pytest.param("ftp://files.example.com/jobs/orders", "'ftp' is not supported", id="1-ftp-is-not-a-job-store"),
        pytest.param("nosuch://x/y", "'nosuch' is not supported", id="2-an-unknown-scheme"),
        pytest.param("memory://jobs/orders", "'memory' is not supported", id="3-memory-is-process-local"),
        pytest.param("http://host/jobs", "'http' is not supported", id="4-http-is-read-only"),
        pytest.param("s3://", "names no bucket", id="5-s3-without-a-bucket"),
        pytest.param("gs://", "names no bucket", id="6-gs-without-a-bucket"),
        pytest.param("s3:/bucket/jobs", "write s3://bucket/jobs", id="7-a-slash-missing-is-not-a-local-path"),
        pytest.param("gs://bucket/jobs", "pip install gcsfs", id="8-a-supported-scheme-without-its-package"),
        pytest.param("simplecache::s3://bucket/jobs", "not supported", id="9-chained-urls"),
        pytest.param(" ", "empty", id="10-blank"),
        pytest.param("S3://bucket/jobs", "lower case", id="11-fsspec-knows-schemes-in-lower-case-only"),
    ],
)
def test_unusable_urls_are_refused_naming_the_supported_schemes(url, needle):
    with pytest.raises(InvalidInputError) as info:
        url_to_fs(url)
    assert needle in str(info.value)
    if "not supported" in needle:
        assert "s3:// or s3a:// (pip install s3fs)" in str(info.value)


@pytest.mark.parametrize("url", ["/tmp/jobs/orders", "relative/dir", "file:///tmp/jobs", "s3://bucket/jobs",
                                 "s3a://bucket/jobs"])
def test_supported_urls_open(url):
    fs, path = url_to_fs(url)
    assert path and not path.endswith("/")


def test_read_json_reads_again_a_file_replaced_while_it_was_opened():
    """s3fs raises FileExpired (errno EBUSY) when the object changed between its HEAD and GET."""
    import errno as errno_codes
    import io

    from airflow_kafka_stream.storage.files import read_json

    class Replaced:
        def __init__(self, failures: int) -> None:
            self.failures = failures

        def open(self, path, mode):
            if self.failures:
                self.failures -= 1
                raise OSError(errno_codes.EBUSY, "the remote file no longer exists")
            return io.BytesIO(b'{"state": "RUNNING"}')

    assert read_json(Replaced(2), "status.json") == {"state": "RUNNING"}
    with pytest.raises(OSError):
        read_json(Replaced(3), "status.json")  # still changing after three reads: the error stands
