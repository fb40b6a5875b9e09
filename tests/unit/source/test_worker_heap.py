"""A reused Python worker freezes its import-time heap once, so PySpark's gc.collect() after each task is short."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_first_read_freezes_what_the_imports_made_and_later_reads_change_nothing():
    # In a fresh interpreter: freezing this test process's own heap would outlive the test.
    script = textwrap.dedent("""
        import gc
        import airflow_kafka_stream.source.source  # what a worker imports to read
        from airflow_kafka_stream.source import worker_heap
        assert gc.get_freeze_count() == 0
        worker_heap.settle()
        frozen = gc.get_freeze_count()
        assert frozen > 10_000, frozen
        leftovers = [[i] for i in range(1000)]
        worker_heap.settle()
        assert gc.get_freeze_count() == frozen, "a later read freezes nothing more"
        walked = len(gc.get_objects())  # what a collection walks: the permanent generation is left out
        assert walked < frozen // 5, (walked, frozen)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
