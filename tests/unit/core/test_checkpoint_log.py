"""Parse/render of Spark checkpoint log files and the choice of position (pure)."""

from __future__ import annotations

import re

import pytest

from airflow_kafka_stream.core.checkpoint_log import (
    HDFS_PROVIDER,
    choose_position,
    compact_sink_entries,
    is_compaction_batch,
    is_temp_name,
    last_contiguous,
    parse_commit_log,
    parse_offset_log,
    parse_query_metadata,
    render_commit_log,
    render_offset_log,
    state_file_version,
)
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import CheckpointFormatError

META = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1795353621501,"conf":'
    '{"spark.sql.streaming.stateStore.providerClass":"' + HDFS_PROVIDER + '"}}'
)
JVM_LINE = '{"t":{"0":23,"1":31}}'
PYTHON_LINE = '{"t": {"1": 31, "0": 23}}'


@pytest.mark.parametrize(
    ("text", "sources"),
    [
        pytest.param(f"v1\n{META}\n{JVM_LINE}", (JVM_LINE,), id="jvm-compact-line-kept-verbatim"),
        pytest.param(f"v1\n{META}\n{PYTHON_LINE}", (PYTHON_LINE,), id="python-spaced-line-kept-verbatim"),
        pytest.param(f"v1\n{META}\n{JVM_LINE}\n-", (JVM_LINE, None), id="dash-is-a-source-without-offsets"),
        pytest.param(f"v1\n{META}\n4", ("4",), id="rate-source-number-line"),
        pytest.param(f"v1\n{META}\n{JVM_LINE}\n", (JVM_LINE,), id="trailing-newline-tolerated"),
    ],
)
def test_parse_offset_log_keeps_source_lines(text, sources):
    entry = parse_offset_log(text)
    assert entry.source_lines == sources
    assert entry.state_store_provider == HDFS_PROVIDER
    assert entry.timestamp_ms == 1795353621501


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("", "empty", id="empty-file-from-interrupted-write"),
        pytest.param(f"x1\n{META}\n{JVM_LINE}", "log version", id="missing-version-line"),
        pytest.param("v1", "metadata line missing", id="truncated-after-version"),
        pytest.param("v1\n{not json\n1", "not valid JSON", id="broken-metadata"),
        pytest.param("v1\n[1]\n1", "JSON object", id="metadata-not-an-object"),
        pytest.param(f"v1\n{META}\n{{broken", "source 0", id="broken-source-line-names-source"),
        pytest.param(b"\xff\xfe", "UTF-8", id="binary-garbage"),
    ],
)
def test_parse_offset_log_rejects_malformed(text, needle):
    with pytest.raises(CheckpointFormatError, match=needle) as caught:
        parse_offset_log(text, "offsets/7")
    assert "offsets/7" in str(caught.value), "the error names the file"


def test_both_json_shapes_give_the_same_offsets():
    jvm = parse_offset_log(f"v1\n{META}\n{JVM_LINE}").source_offsets(0)
    python = parse_offset_log(f"v1\n{META}\n{PYTHON_LINE}").source_offsets(0)
    assert jvm == python == {TopicPartition("t", 0): 23, TopicPartition("t", 1): 31}


def test_render_replaces_only_the_chosen_source_compact_and_sorted():
    entry = parse_offset_log(f"v1\n{META}\n{PYTHON_LINE}\n-\n7")
    moved = entry.with_source_offsets(0, {TopicPartition("t", 1): 5, TopicPartition("t", 0): 9})
    assert render_offset_log(moved) == f'v1\n{META}\n{{"t":{{"0":9,"1":5}}}}\n-\n7'


def test_render_round_trips_unchanged_file():
    text = f"v1\n{META}\n{PYTHON_LINE}\n-"
    assert render_offset_log(parse_offset_log(text)) == text


@pytest.mark.parametrize(
    ("line", "index", "needle"),
    [
        pytest.param("4", 0, "Kafka", id="rate-source-is-not-kafka"),
        pytest.param("-", 0, "no offsets", id="dash-source"),
        pytest.param(JVM_LINE, 3, "does not exist", id="index-out-of-range"),
    ],
)
def test_source_offsets_errors(line, index, needle):
    with pytest.raises(CheckpointFormatError, match=needle):
        parse_offset_log(f"v1\n{META}\n{line}").source_offsets(index)


def test_commit_log_round_trip_keeps_unknown_fields():
    text = 'v1\n{"nextBatchWatermarkMs":12,"stateUniqueIds":{}}'
    entry = parse_commit_log(text)
    assert entry.next_batch_watermark_ms == 12
    assert render_commit_log(entry) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('{"id":"abc"}', "abc", id="compact"),
        pytest.param('{"id": "abc"}\n', "abc", id="spaced-with-newline"),
    ],
)
def test_query_metadata(text, expected):
    assert parse_query_metadata(text) == expected


@pytest.mark.parametrize("text", [pytest.param('{"x":1}', id="no-id"), pytest.param('{"id":""}', id="empty-id")])
def test_query_metadata_rejects(text):
    with pytest.raises(CheckpointFormatError, match="query id"):
        parse_query_metadata(text)


@pytest.mark.parametrize(
    ("offsets", "commits", "committed", "in_flight"),
    [
        pytest.param(["0", "1", "2"], ["0", "1", "2"], 2, None, id="all-committed"),
        pytest.param(["0", "1", "2"], ["0", "1"], 1, 2, id="last-batch-in-flight"),
        pytest.param(["0"], [], None, 0, id="first-batch-in-flight"),
        pytest.param([], [], None, None, id="empty-checkpoint"),
        pytest.param(["3", ".3.crc", ".4.crc", "4", ".5.abc.tmp"], ["3", ".3.crc"], 3, 4, id="crc-and-temp-ignored"),
        pytest.param(["5", "6"], ["5", "6", "7"], 6, None, id="commit-ahead-not-a-position"),
        pytest.param(["8", "9", "10"], ["8", "9", "10"], 10, None, id="numeric-not-lexical-order"),
    ],
)
def test_choose_position(offsets, commits, committed, in_flight):
    position = choose_position(offsets, commits)
    assert (position.committed, position.in_flight) == (committed, in_flight)


@pytest.mark.parametrize(
    ("present", "seed", "expected"),
    [
        pytest.param(range(0, 1), 0, 0, id="single-batch"),
        pytest.param(range(0, 10), 3, 9, id="small-range"),
        pytest.param(range(9900, 10000), 9950, 9999, id="purged-bottom"),
        pytest.param(range(0, 1025), 0, 1024, id="power-of-two-edge"),
    ],
)
def test_last_contiguous(present, seed, expected):
    ids = set(present)
    probes: list[int] = []

    def exists(batch: int) -> bool:
        probes.append(batch)
        return batch in ids

    assert last_contiguous(seed, exists) == expected
    assert len(probes) <= 2 * (len(ids).bit_length() + 1), "galloping search, not a scan"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("12.delta", (12, "delta"), id="delta"),
        pytest.param("3.snapshot", (3, "snapshot"), id="snapshot"),
        pytest.param(".12.delta.crc", None, id="crc-is-not-state"),
        pytest.param("_metadata", None, id="metadata-dir"),
    ],
)
def test_state_file_version(name, expected):
    assert state_file_version(name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(".3.1f2e.tmp", True, id="hadoop-temp"),
        pytest.param("..3.1f2e.tmp.crc", True, id="crc-of-temp"),
        pytest.param("3", False, id="batch-file"),
        pytest.param(".3.crc", False, id="plain-crc"),
    ],
)
def test_is_temp_name(name, expected):
    assert is_temp_name(name) is expected


@pytest.mark.parametrize(
    ("batch", "interval", "expected"),
    [
        pytest.param(2, 3, True, id="third-batch-compacts"),
        pytest.param(3, 3, False, id="after-compaction"),
        pytest.param(9, 10, True, id="spark-default"),
    ],
)
def test_is_compaction_batch(batch, interval, expected):
    assert is_compaction_batch(batch, interval) is expected


def test_compact_sink_entries_concatenates_entries():
    assert compact_sink_entries(['v1\n{"a":1}', b"v1", 'v1\n{"b":2}\n']) == 'v1\n{"a":1}\n{"b":2}'


# -- offset log version 2 (Spark 4.2's spark.sql.streaming.offsetLog.formatVersion=2) ------------------------

V2_METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1795887994131,"conf":{},"sourceMetadataInfo":{}}'
V2_TEXT = f'v2\n{V2_METADATA}\n1:{{"b":{{"0":7}}}}\n2:-\n0:{{"a":{{"0":5,"1":3}}}}'


def test_a_v2_offsets_file_reads_by_source_ordinal_and_writes_back_as_found():
    entry = parse_offset_log(V2_TEXT)
    assert (entry.version, entry.metadata_line) == (2, V2_METADATA)
    assert entry.source_lines == ('{"a":{"0":5,"1":3}}', '{"b":{"0":7}}', None)
    assert entry.source_offsets(1) == {TopicPartition("b", 0): 7}
    assert render_offset_log(entry) == V2_TEXT, "same version, same line order, same text"


def test_a_v2_reset_rewrites_only_its_source_and_keeps_the_format():
    entry = parse_offset_log(V2_TEXT).with_source_offsets(0, {TopicPartition("a", 0): 1, TopicPartition("a", 1): 2})
    assert render_offset_log(entry) == f'v2\n{V2_METADATA}\n1:{{"b":{{"0":7}}}}\n2:-\n0:{{"a":{{"0":1,"1":2}}}}'


@pytest.mark.parametrize(("lines", "names"), [
    ('events:{"a":{"0":1}}', "not supported"),  # a named source (source evolution): tools address by ordinal
    ('{"a":{"0":1}}', "'<source ordinal>:<offsets>'"),  # a v1 line in a v2 file
    ('0:{"a":{"0":1}}\n0:{"a":{"0":2}}', "appears twice"),
    ('1:{"a":{"0":1}}', "are not 0..0"),
    ('0:{"a":', "not valid JSON"),
])
def test_a_v2_file_the_tools_cannot_address_is_refused_never_rewritten(lines, names):
    with pytest.raises(CheckpointFormatError, match=re.escape(names)):
        parse_offset_log(f"v2\n{V2_METADATA}\n{lines}", "offsets/3")


def test_an_offset_log_version_newer_than_the_tools_is_refused():
    with pytest.raises(CheckpointFormatError, match="v3 is newer than these tools read"):
        parse_offset_log(f'v3\n{V2_METADATA}\n0:{{"a":{{"0":1}}}}', "offsets/3")
