"""Read a driver's own error out of the end of its log (pure text: no file access here)."""

from __future__ import annotations

import re

#: A line Spark's log4j writes (``26/11/26 04:19:52 WARN Utils: ...``), or the JVM's own notices: not the error.
_SPARK_LINE = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ |WARNING: |Picked up |Using Spark's default log4j)")
#: The last line of a traceback a PySpark worker prints when the JVM closed its socket first (a task
#: killed by a stop, over a Unix domain socket): the worker's teardown, not the application's error.
_WORKER_TEARDOWN = re.compile(r"^(BrokenPipeError|ConnectionResetError): \[Errno \d+\]")
_PYSPARK_FRAME = re.compile(r'^\s+File ".*/pyspark[/.]')


def driver_error(log_tail: str) -> str | None:
    """The last line the application itself wrote (a traceback's last line, a SystemExit's message), or None.

    Spark's own log lines after it (shutdown hooks, temp directories), and a PySpark worker's
    teardown traceback, are passed over.
    """
    lines = log_tail.splitlines()
    index = len(lines) - 1
    while index >= 0:
        line = lines[index]
        text = line.strip()
        if _WORKER_TEARDOWN.match(text) and index > 0 and _PYSPARK_FRAME.match(lines[index - 1]):
            index = _traceback_start(lines, index) - 1
            continue
        if text and not _SPARK_LINE.match(text) and not line.startswith((" ", "\t")):
            return text
        index -= 1
    return None


def _traceback_start(lines: list[str], last: int) -> int:
    """The index of the ``Traceback`` header above a traceback's last line (its frames are indented)."""
    index = last - 1
    while index > 0 and lines[index].startswith((" ", "\t")):
        index -= 1
    return index if lines[index].startswith("Traceback") else index + 1
