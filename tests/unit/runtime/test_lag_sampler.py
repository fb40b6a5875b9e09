"""The lag sampler's arithmetic and its newest-batch-only, never-failing behaviour (Kafka replaced by a function)."""

from __future__ import annotations

import threading

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.runtime.lag_sampler import LagSampler, records_waiting

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_records_waiting_counts_up_to_the_high_watermark():
    bounds = {A0: (0, 10), A1: (5, 5), B0: (0, 3)}
    assert records_waiting({A0: 4, A1: 5, B0: 3}, bounds) == 6
    assert records_waiting({A0: 12}, bounds) == 0  # read past a truncated partition: nothing waiting
    assert records_waiting({TopicPartition("gone", 0): 7, A0: 10}, bounds) == 0


def test_only_the_newest_pending_batch_is_sampled():
    asked, samples = [], []
    sampler = LagSampler(lambda tps: asked.append(tps) or {A0: (0, 100)}, lambda b, n: samples.append((b, n)), 60)
    sampler._pending = (1, {A0: 10})  # driven without the thread, as the runtime's thread would
    sampler._pending = (2, {A0: 40})
    assert sampler.sample_pending() is True
    assert samples == [(2, 60)] and asked == [[A0]]
    assert sampler.sample_pending() is False  # nothing pending any more


def test_a_failing_request_is_skipped_and_the_thread_goes_on():
    samples, calls = [], []
    done = threading.Event()

    def watermarks(tps):
        calls.append(tps)
        if len(calls) == 1:
            raise RuntimeError("broker down")
        done.set()
        return {A0: (0, 9)}

    sampler = LagSampler(watermarks, lambda b, n: samples.append((b, n)), 0.05)
    sampler.submit(1, {A0: 1})
    for _ in range(200):
        if calls:
            break
        threading.Event().wait(0.01)
    sampler.submit(2, {A0: 4})
    assert done.wait(5)
    sampler.close()
    assert samples == [(2, 5)]
    sampler.submit(3, {A0: 9})  # after close: ignored, no thread started again
    assert samples == [(2, 5)]
