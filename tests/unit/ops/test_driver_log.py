"""What a task says when a driver exits before it reports: the status it left, and the driver's own error."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.driver_log import driver_error
from airflow_kafka_stream.ops.watch import status_shows

SPARK = "26/11/26 04:19:52 WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address"


@pytest.mark.parametrize(("tail", "error", "why"), [
    (f"{SPARK}\nbroken version: a dependency this build needs is missing\n", "broken version: a dependency this "
     "build needs is missing", "a SystemExit's message is the last line the application wrote"),
    ("Traceback (most recent call last):\n  File \"job.py\", line 3, in <module>\n    main()\n"
     "ValueError: bad topic name\n26/11/26 04:19:53 INFO ShutdownHookManager: Shutdown hook called\n"
     "26/11/26 04:19:53 INFO ShutdownHookManager: Deleting directory /tmp/spark-1\n",
     "ValueError: bad topic name", "Spark's shutdown lines after a traceback are passed over"),
    (f"WARNING: Using incubator modules: jdk.incubator.vector\n{SPARK}\n", None, "only Spark's lines: no error"),
    ("", None, "no log"),
    ("Traceback (most recent call last):\n  File \"job.py\", line 3, in <module>\n    main()\n"
     "ValueError: bad topic name\nTraceback (most recent call last):\n"
     "  File \"/env/lib/pyspark.zip/pyspark/daemon.py\", line 262, in manager\n"
     "  File \"/env/lib/pyspark.zip/pyspark/daemon.py\", line 95, in worker\n"
     "BrokenPipeError: [Errno 32] Broken pipe\n",
     "ValueError: bad topic name", "a Python worker's teardown after the failure is not the application's error"),
    ("Traceback (most recent call last):\n  File \"job.py\", line 9, in <module>\n    sys.stdout.flush()\n"
     "BrokenPipeError: [Errno 32] Broken pipe\n",
     "BrokenPipeError: [Errno 32] Broken pipe", "the application's own broken pipe is its error"),
])
def test_the_drivers_error_is_the_last_line_the_application_wrote(tail, error, why):
    assert driver_error(tail) == error, why


@pytest.mark.parametrize(("status", "said", "why"), [
    (None, "the job home has no status: the driver never reported", "a fresh job home"),
    ({"state": "STOPPED", "started_at": "2026-11-22T10:00:00+00:00"},
     "the job's status still shows STOPPED, a previous driver's (started 2026-11-22T10:00:00+00:00)",
     "an upgrade stopped the old version, whose status is still there"),
    ({"state": "STARTING", "started_at": "2026-11-22T10:05:01+00:00"},
     "the job's status still shows STARTING, this driver's (started 2026-11-22T10:05:01+00:00)",
     "it reported STARTING, then exited"),
])
def test_the_status_a_driver_left_is_said_as_it_is(status, said, why):
    assert status_shows(status, "2026-11-22T10:05:00+00:00") == said, why
