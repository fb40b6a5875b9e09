"""Savepoint manifest round trip and the HDFS state files a savepoint needs (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.savepoint_manifest import Manifest, hdfs_state_files, parse_manifest, render_manifest
from airflow_kafka_stream.errors import SavepointError

MANIFEST = Manifest(
    savepoint_id="sp-1",
    query_id="q",
    batch_id=7,
    source_lines=('{"t": {"0": 5}}', None),
    state_store_provider="p",
    stateful=True,
    app_version="1.2",
    created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    spark_version="4.2.0",
    files={"metadata": "ab", "offsets/7": "cd"},
)


def test_manifest_round_trip():
    assert parse_manifest(render_manifest(MANIFEST)) == MANIFEST
    assert MANIFEST.source_offsets(0) == {TopicPartition("t", 0): 5}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("{", "unreadable", id="not-json"),
        pytest.param('{"format_version": 99}', "not supported", id="future-format"),
        pytest.param('{"format_version": 1}', "unreadable", id="fields-missing"),
    ],
)
def test_manifest_rejects(text, needle):
    with pytest.raises(SavepointError, match=needle):
        parse_manifest(text)


@pytest.mark.parametrize("index", [pytest.param(1, id="dash-source"), pytest.param(5, id="no-such-source")])
def test_source_offsets_errors(index):
    with pytest.raises(SavepointError, match="source"):
        MANIFEST.source_offsets(index)


@pytest.mark.parametrize(
    ("names", "version", "expected"),
    [
        pytest.param(["1.delta", "2.delta", "3.delta"], 3, ["1.delta", "2.delta", "3.delta"], id="deltas-only"),
        pytest.param(
            ["5.snapshot", "6.delta", "7.delta", "4.delta", "5.delta"],
            7,
            ["5.snapshot", "6.delta", "7.delta"],
            id="latest-snapshot-then-deltas",
        ),
        pytest.param(["5.snapshot", "5.delta", "8.delta"], 5, ["5.snapshot"], id="snapshot-is-the-version"),
        pytest.param(["2.delta", "3.delta", "9.snapshot"], 3, None, id="newer-snapshot-does-not-help"),
        pytest.param(["1.delta", "3.delta"], 3, None, id="missing-delta"),
    ],
)
def test_hdfs_state_files(names, version, expected):
    if expected is None:
        with pytest.raises(SavepointError, match="cannot be rebuilt"):
            hdfs_state_files(names, version, "/s/state/0/0")
    else:
        assert hdfs_state_files(names, version, "/s/state/0/0") == expected
