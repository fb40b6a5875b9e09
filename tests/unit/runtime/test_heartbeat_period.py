"""The heartbeat keeps its period however long a beat's work takes (short of the period itself).

A driver fences itself after two intervals without a heartbeat. If the period were counted from the end of a
beat, a status write that takes most of an interval (a loaded host, a slow store) would stretch the silence
between two heartbeats toward the fence; counted from the beat's start, it stays one interval.
"""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

from airflow_kafka_stream.runtime.heartbeat import Heartbeat
from airflow_kafka_stream.runtime.run_state import RunState

INTERVAL = 0.4


class SlowBeats(Heartbeat):
    """A heartbeat whose status write takes ``write_seconds``; it records when each write ended."""

    def __init__(self, write_seconds: float) -> None:
        super().__init__(RunState(state="RUNNING"), SimpleNamespace(heartbeat_seconds=INTERVAL, job_name="job"),
                         home=None, committer=None, skipped=SimpleNamespace(collect=lambda: 0),
                         time_lag=SimpleNamespace(poke=lambda _offsets: None), metrics=lambda: None,
                         generation=lambda: None)
        self.write_seconds, self.written, self.beats, self.fenced = write_seconds, [], [], []

    def write_status(self, *, beat: bool = False) -> str:
        time.sleep(self.write_seconds)
        self.written.append(time.monotonic())
        self.beats.append(beat)
        self._beat_times = (0.0, self.write_seconds)
        return self.run.state

    def fence(self, silent: float, cause: str) -> None:
        self.fenced.append((silent, cause))

    def run_for(self, seconds: float) -> list[float]:
        thread = threading.Thread(target=self._heartbeat_loop, daemon=True)
        thread.start()
        time.sleep(seconds)
        self.run.closing.set()
        self.run.wake_status.set()
        thread.join(5)
        return [b - a for a, b in zip(self.written, self.written[1:], strict=False)]


def test_a_slow_write_does_not_stretch_the_period_toward_the_fence(caplog):
    beats = SlowBeats(write_seconds=0.7 * INTERVAL)
    with caplog.at_level(logging.WARNING):
        gaps = beats.run_for(10 * INTERVAL)
    assert len(gaps) >= 6, gaps
    # Counted from each beat's end the gaps would be 1.7 intervals; from its start they are one.
    assert max(gaps) < 1.3 * INTERVAL, [round(g / INTERVAL, 2) for g in gaps]
    assert not beats.fenced
    assert "a heartbeat took" in caplog.text and "fences itself after" in caplog.text, "a slow beat is reported"


def test_a_quick_write_beats_once_an_interval_and_says_nothing(caplog):
    beats = SlowBeats(write_seconds=0.0)
    with caplog.at_level(logging.WARNING):
        gaps = beats.run_for(6 * INTERVAL)
    assert 4 <= len(gaps) <= 7 and min(gaps) > 0.8 * INTERVAL, gaps
    assert "heartbeat took" not in caplog.text
    # The first write of a state is durable (fsynced), the beats after it are not: an fsync waits behind every
    # other write of a busy disk.
    assert beats.beats[0] is False and all(beats.beats[1:]), beats.beats
