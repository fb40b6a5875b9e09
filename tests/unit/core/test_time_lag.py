"""Time lag per partition: the arithmetic (core.time_lag), the status's TimeLag, the driver's sampler with Kafka
replaced by fakes, and the texts (status line, verify column, the job page's seconds plot)."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.status_document import StatusDocument, TimeLag
from airflow_kafka_stream.core.time_lag import (
    batch_delay_seconds,
    batch_ranges,
    lagging,
    partition_seconds,
    time_lag_document,
)
from airflow_kafka_stream.core.verify import PartitionObservation, evaluate
from airflow_kafka_stream.plugins.time_lag_plot import seconds_text, time_lag_plot
from airflow_kafka_stream.render.checkpoint import verify_text
from airflow_kafka_stream.render.job import time_lag_text
from airflow_kafka_stream.runtime.progress import progress_from_json
from airflow_kafka_stream.runtime.time_lag import TIME_LAG_SAMPLES, TimeLagSampler

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
NOW_MS = 1_800_000_000_000
NOW = datetime.fromtimestamp(NOW_MS / 1000, UTC)


@pytest.mark.parametrize(("offsets", "highs", "stamps", "expected", "reason"), [
    pytest.param({A0: 10}, {A0: 10}, {}, {A0: 0.0}, "a partition at its high watermark is caught up: 0, no look",
                 id="1-caught-up"),
    pytest.param({A0: 4}, {A0: 10}, {A0: NOW_MS - 90_000}, {A0: 90.0},
                 "now minus the timestamp of the record at the next offset", id="2-behind"),
    pytest.param({A0: 4}, {A0: 10}, {A0: None}, {A0: 0.0},
                 "no record from the offset on (markers only): nothing waits", id="3-markers-only"),
    pytest.param({A0: 4}, {A0: 10}, {A0: NOW_MS + 5_000}, {A0: 0.0},
                 "a record stamped in the future (producer clock ahead) counts 0, never negative", id="4-future"),
    pytest.param({A0: 4, TopicPartition("gone", 0): 3}, {A0: 10}, {A0: NOW_MS - 1_500}, {A0: 1.5},
                 "a partition without a watermark (gone) is left out", id="5-gone"),
    pytest.param({A0: 4, A1: 2}, {A0: 10, A1: 9}, {A0: NOW_MS - 1_000}, None,
                 "a lagging partition that was not looked at fails the measurement (it is skipped)",
                 id="6-unanswered"),
    pytest.param({A0: 12}, {A0: 10}, {}, {A0: 0.0}, "read past a truncated partition: nothing waits",
                 id="7-past-the-end"),
])
def test_partition_seconds(offsets, highs, stamps, expected, reason):
    assert partition_seconds(NOW_MS, offsets, highs, stamps) == expected, reason


def test_only_lagging_partitions_are_looked_at():
    assert lagging({A0: 10, A1: 3, B0: 1}, {A0: 10, A1: 9}) == {A1: 3}


@pytest.mark.parametrize(("starts", "ends", "expected", "reason"), [
    pytest.param({A0: 0, A1: 5}, {A0: 10, A1: 5}, {A0: (0, 10)}, "a partition that read nothing has no range",
                 id="1-read-only"),
    pytest.param(None, {A0: 10}, {}, "without start offsets no range is known", id="2-no-starts"),
    pytest.param({A0: 0}, {A0: 10, B0: 3}, {A0: (0, 10)}, "a partition new to the batch is left out",
                 id="3-new-partition"),
])
def test_batch_ranges(starts, ends, expected, reason):
    assert batch_ranges(starts, ends) == expected, reason


@pytest.mark.parametrize(("newest", "expected", "reason"), [
    pytest.param({A0: NOW_MS - 2_000, A1: NOW_MS - 500}, 0.5, "the newest record among the partitions counts",
                 id="1-newest"),
    pytest.param({A0: None}, None, "no record in the range: no delay", id="2-none"),
    pytest.param({A0: NOW_MS + 10}, 0.0, "a record stamped after the commit counts 0", id="3-future"),
])
def test_batch_delay(newest, expected, reason):
    assert batch_delay_seconds(NOW_MS, newest) == expected, reason


def test_the_document_is_the_shared_contract_and_parses_back():
    document = time_lag_document(NOW, {A0: 12.3, A1: 0.0, B0: 4.0}, 0.8)
    assert document == {"measured_at": NOW.isoformat(), "partitions": {"a": {"0": 12.3, "1": 0.0}, "b": {"0": 4.0}},
                        "max_seconds": 12.3, "last_batch_delay_seconds": 0.8}
    parsed = StatusDocument.parse({"state": "RUNNING", "time_lag": json.loads(json.dumps(document)),
                                   "time_lag_samples": [[1.0, 12.3], "odd", [2.0]]})
    assert parsed.time_lag == TimeLag(NOW, {"a": {"0": 12.3, "1": 0.0}, "b": {"0": 4.0}}, 12.3, 0.8)
    assert parsed.time_lag.to_dict() == document
    assert parsed.time_lag.worst() == [("a", 0, 12.3), ("b", 0, 4.0), ("a", 1, 0.0)]
    assert parsed.time_lag_samples == ([1.0, 12.3],)
    assert time_lag_document(NOW, {}, None)["max_seconds"] == 0.0


@pytest.mark.parametrize(("raw", "reason"), [
    pytest.param(None, "absent (an older runtime, or not measured yet)", id="1-absent"),
    pytest.param("12", "not a mapping", id="2-text"),
    pytest.param({"partitions": {}, "max_seconds": True}, "a boolean is no number", id="3-boolean"),
    pytest.param({"max_seconds": 3.0}, "no partitions", id="4-no-partitions"),
])
def test_a_malformed_time_lag_reads_as_none(raw, reason):
    assert StatusDocument.parse({"state": "RUNNING", "time_lag": raw}).time_lag is None, reason


class FakeLooks:
    def __init__(self, highs, stamps, newest=None, fail=0):
        self.highs_of, self.stamps, self.newest, self.fail, self.asked = highs, stamps, newest or {}, fail, []

    def highs(self, partitions):
        if self.fail:
            self.fail -= 1
            raise RuntimeError("broker down")
        return {tp: self.highs_of[tp] for tp in partitions if tp in self.highs_of}

    def first_at(self, offsets):
        self.asked.append(dict(offsets))
        return {tp: self.stamps.get(tp) for tp in offsets}

    def newest_before(self, ranges):
        self.asked.append(dict(ranges))
        return {tp: self.newest.get(tp) for tp in ranges}

    def close(self):
        pass


def test_the_sampler_measures_the_poked_offsets_and_the_last_batch_delay():
    looks = FakeLooks({A0: 10, A1: 5}, {A0: NOW_MS - 90_000}, newest={A0: NOW_MS - 3_000})
    clock = iter([NOW_MS / 1000 - 1, NOW_MS / 1000])
    sampler = TimeLagSampler(looks, 60, clock=lambda: next(clock))
    sampler.batch_committed({A0: 0, A1: 5}, {A0: 4, A1: 5}, records=4)  # committed at NOW - 1 s
    sampler._offsets = {A0: 4, A1: 5}  # poked (driven without the thread)
    assert sampler.measure() is True
    assert looks.asked == [{A0: 4}, {A0: (0, 4)}], "only the lagging partition and the batch's read range"
    document = sampler.document()
    assert document["partitions"] == {"a": {"0": 90.0, "1": 0.0}} and document["max_seconds"] == 90.0
    assert document["last_batch_delay_seconds"] == 2.0
    assert sampler.samples() == [[round(NOW_MS / 1000, 1), 90.0]]


def test_a_batch_without_records_does_not_change_the_delay():
    sampler = TimeLagSampler(FakeLooks({}, {}), 60)
    sampler.batch_committed({A0: 0}, {A0: 2}, records=0)
    assert sampler._batch is None


def test_a_failed_look_is_skipped_and_logged_once(caplog):
    looks = FakeLooks({A0: 10}, {A0: NOW_MS - 5_000}, fail=2)
    sampler = TimeLagSampler(looks, 60, clock=lambda: NOW_MS / 1000)
    sampler._offsets = {A0: 4}
    with caplog.at_level(logging.INFO, logger="airflow_kafka_stream.runtime.time_lag"):
        assert sampler.measure() is False and sampler.measure() is False
        assert sampler.document() is None, "nothing measured: the status has no time lag yet"
        assert sampler.measure() is True
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "broker down" in warnings[0].getMessage()
    assert sampler.document()["max_seconds"] == 5.0


def test_the_samples_are_bounded():
    sampler = TimeLagSampler(FakeLooks({A0: 10}, {}), 60, clock=lambda: NOW_MS / 1000)
    sampler._offsets = {A0: 10}
    for _ in range(TIME_LAG_SAMPLES + 5):
        sampler.measure()
    assert len(sampler.samples()) == TIME_LAG_SAMPLES


def test_the_sampler_thread_measures_once_per_interval_and_stops_on_close():
    looks = FakeLooks({A0: 10}, {})
    sampler = TimeLagSampler(looks, 3600)
    sampler.poke(None)
    assert sampler._thread is None, "no offsets yet: nothing to measure, no thread"
    for _ in range(5):
        sampler.poke({A0: 10})
    deadline = time.monotonic() + 5
    while sampler.document() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.close()
    assert len(sampler.samples()) == 1 and not sampler._thread.is_alive()


def test_progress_carries_the_batch_start_offsets():
    progress = progress_from_json(json.dumps({
        "id": "q", "batchId": 3, "numInputRows": 4,
        "sources": [{"startOffset": '{"a":{"0":0}}', "endOffset": '{"a":{"0":4}}'}]}))
    assert progress.start_offsets == {A0: 0} and progress.end_offsets == {A0: 4}


def test_the_status_line_names_the_most_behind_partitions_first():
    lag = TimeLag(NOW, {"orders": {str(p): float(p) for p in range(8)}}, 7.0, 1.25)
    assert time_lag_text(lag) == ("max 7.0 s (orders:7 7.0 s, orders:6 6.0 s, orders:5 5.0 s, orders:4 4.0 s, "
                                  "orders:3 3.0 s, ... (8 partitions)); last batch 1.2 s after its newest record")


def test_verify_shows_a_time_lag_column_only_when_measured():
    seen = PartitionObservation(A0, 40, 40, 0, 100)
    result = evaluate([seen], now=NOW, group="g")
    assert "TIME LAG" not in verify_text(result) and "time_lag_seconds" not in result.to_dict()["partitions"][0]
    from dataclasses import replace

    measured = replace(result, time_lag_seconds={A0: 90.04})
    lines = verify_text(measured).splitlines()
    assert lines[0].split()[:9] == ["TOPIC", "PARTITION", "CHECKPOINT", "GROUP", "LOW", "HIGH", "LAG", "TIME", "LAG"]
    assert lines[1].split()[:8] == ["a", "0", "40", "40", "0", "100", "60", "90.0s"]
    assert measured.to_dict()["partitions"][0]["time_lag_seconds"] == 90.04


@pytest.mark.parametrize(("seconds", "text"), [
    pytest.param(12.34, "12.3 s", id="1-seconds"), pytest.param(245, "4 min 05 s", id="2-minutes"),
    pytest.param(7380, "2 h 03 min", id="3-hours"),
])
def test_seconds_text(seconds, text):
    assert seconds_text(seconds) == text


def test_the_seconds_plot_draws_every_measurement_and_marks_breaches():
    svg = time_lag_plot([[1000.0, 90.0], [1005.0, 45.0], [1010.0, 0.0]], limit=60.0)
    assert svg.count(",") - svg.count(", ") >= 3 and 'class="time-lag-plot"' in svg
    assert "<b>0.0 s</b>" in svg and "peak 1 min 30 s" in svg
    assert svg.count('class="breach"') == 1 and 'class="limit"' in svg
    assert "No time lag measured yet" in time_lag_plot([])
