"""A rehearsal bounded through its checkpoint (Spark's connector keeps the options its DataFrame was defined with):
the copy's pending batch stretched, a stateless run's checkpoint seeded with its start and end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_kafka_stream.checkpoint.initial_offsets import INITIAL_OFFSETS_HEADER
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.rehearsal_copy import (
    RehearsalCopy,
    bound_pending_batch,
    seed_checkpoint,
)
from airflow_kafka_stream.core.checkpoint_log import parse_offset_log
from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.rehearsal import streaming_source_count, stretch_end
from airflow_kafka_stream.core.spark_kafka_options import UNSEEDED_START, connector_options

METADATA = {"batchWatermarkMs": 5000, "batchTimestampMs": 1700000000000, "conf": {"a": "b"}}
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def copied(root: Path, version: int = 1, *, rerun: bool = True) -> RehearsalCopy:
    """A rehearsal copy of two Kafka sources (topic a, topic b): batch 3 committed, batch 4 pending when ``rerun``."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": "6a0c3e0e-1f7e-4a51-9d1e-3d2c0f1e2a3b"}))

    def lines(a0: int, a1: int, b0: int) -> list[str]:
        sources = [json.dumps({"a": {"0": a0, "1": a1}}), json.dumps({"b": {"0": b0}})]
        return [f"{i}:{line}" for i, line in enumerate(sources)] if version == 2 else sources

    (root / "offsets" / "3").write_text("\n".join([f"v{version}", json.dumps(METADATA), *lines(10, 20, 30)]))
    (root / "commits" / "3").write_text('v1\n{"nextBatchWatermarkMs":5000}')
    start = {A0: 10, A1: 20, B0: 30}
    if not rerun:
        entry = parse_offset_log((root / "offsets" / "3").read_text())
        return RehearsalCopy(str(root), None, start, start, entry, 3)
    (root / "offsets" / "4").write_text("\n".join([f"v{version}", json.dumps(METADATA), *lines(12, 25, 31)]))
    entry = parse_offset_log((root / "offsets" / "4").read_text())
    return RehearsalCopy(str(root), 4, start, {A0: 12, A1: 25, B0: 31}, entry, 3)


@pytest.mark.parametrize("version", [1, 2])
def test_the_pending_batch_is_stretched_to_the_end_each_source_reads(tmp_path, version):
    copy = bound_pending_batch(copied(tmp_path / "c", version), {A0: 100, A1: 25, B0: 40})
    position = read_position(copy.url)
    assert (position.batch_id, position.in_flight_batch_id, copy.rerun_batch) == (3, 4, 4)
    flight = position.in_flight_offsets
    assert flight.version == version and flight.metadata == METADATA  # the batch's own settings and watermark
    assert flight.kafka_sources().by_index == {0: {A0: 100, A1: 25}, 1: {B0: 40}}
    assert copy.end == {A0: 100, A1: 25, B0: 40}


def test_a_copy_without_a_batch_to_re_run_gets_one_after_its_committed_batch(tmp_path):
    copy = bound_pending_batch(copied(tmp_path / "c", rerun=False), {A0: 11, A1: 20, B0: 35})
    position = read_position(copy.url)
    assert (position.batch_id, position.in_flight_batch_id, copy.rerun_batch) == (3, 4, 4)
    assert position.in_flight_offsets.kafka_sources().by_index == {0: {A0: 11, A1: 20}, 1: {B0: 35}}


@pytest.mark.parametrize("version", [1, 2])
def test_a_seeded_checkpoint_runs_its_first_batch_from_the_start_to_the_end_without_state(tmp_path, version):
    copy = copied(tmp_path / "c", version)
    seed_checkpoint(str(tmp_path / "s"), copy, {A0: 10, A1: 21, B0: 30}, {A0: 11, A1: 25, B0: 31})
    position = read_position(str(tmp_path / "s"))
    assert (position.batch_id, position.in_flight_batch_id) == (None, 0)
    first = position.in_flight_offsets
    assert first.version == version and first.watermark_ms == 0 and first.conf == {"a": "b"}
    assert first.kafka_sources().by_index == {0: {A0: 11, A1: 25}, 1: {B0: 31}}
    # Each source's start where Spark's connector reads it first: a zero byte, its version, the offsets.
    assert (tmp_path / "s" / "sources" / "0" / "0").read_bytes() == INITIAL_OFFSETS_HEADER + b'{"a":{"0":10,"1":21}}'
    assert (tmp_path / "s" / "sources" / "1" / "0").read_bytes() == INITIAL_OFFSETS_HEADER + b'{"b":{"0":30}}'
    assert not (tmp_path / "s" / "commits").exists()


def test_the_stretch_takes_an_even_share_of_newer_records_never_past_the_topic_nor_back():
    end = {A0: 100, A1: 200, B0: 300}
    assert stretch_end(end, {A0: 10_000, A1: 250, B0: 300}, 3000) == {A0: 1100, A1: 250, B0: 300}
    assert stretch_end(end, {A0: 90}, 3000) == end  # a high below the end (or unknown) never moves it back
    assert stretch_end({A0: 0}, {A0: 5}, 0) == {A0: 1}


KAFKA = ("~StreamingRelationV2 org.apache.spark.sql.kafka010.KafkaSourceProvider@6a7de5da, kafka, "
         "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@5174cc3c, [subscribe=t], [key#7], "
         "StreamingRelation kafka, [key#0], name=<Unassigned>, name=<Unassigned>")
RATE = "~StreamingRelationV2 org.apache.spark.sql.execution.streaming.sources.RateStreamProvider@6, rate, [], name=<U>"


def test_the_streaming_sources_of_a_plan_are_counted_one_per_relation_node():
    """Plans as Spark 4 prints them (``df._jdf.queryExecution().logical()``); the V1 relation a V2 node carries is
    part of its line, not a source of its own."""
    assert streaming_source_count(f"'Aggregate ['key], ['key]\n+- {KAFKA}\n") == 1
    assert streaming_source_count(f"~Union false, false\n:- ~Project [value#8]\n:  +- {KAFKA}\n"
                                  f"+- ~Project [value#25]\n   +- {RATE}\n") == 2
    assert streaming_source_count("LocalRelation [a#1]") == 0


def test_a_standby_defines_its_connector_query_with_a_start_that_fails_unless_seeded():
    options = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingOffsets": "group", "groupId": "g"}
    assert connector_options(options, None, seeded=True)["startingOffsets"] == UNSEEDED_START
    assert connector_options(options, None)["startingOffsets"] == "earliest"
    assert "t" not in json.loads(UNSEEDED_START)  # names no topic a job reads
