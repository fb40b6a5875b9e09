"""A live savepoint's copy yields the CPU to the job beside it: its work runs at nice +10 on a thread of its own,
and the calling process keeps its priority."""

from __future__ import annotations

import os
import threading

import pytest

from airflow_kafka_stream.storage.low_priority import BACKGROUND_NICENESS, run_at_low_priority


def own_niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_work_runs_niced_and_the_caller_keeps_its_priority():
    before = own_niceness()
    seen = run_at_low_priority(own_niceness, "test-copy")
    assert seen == max(before, BACKGROUND_NICENESS)
    assert own_niceness() == before


def test_the_work_s_exception_reaches_the_caller():
    def fail() -> None:
        raise ValueError("the copy failed")

    with pytest.raises(ValueError, match="the copy failed"):
        run_at_low_priority(fail, "test-copy")
