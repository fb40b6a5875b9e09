"""Read a driver's own error out of the end of its log (pure text: no file access here)."""

from __future__ import annotations

import re

#: A line Spark's log4j writes (``26/11/26 04:19:52 WARN Utils: ...``), or the JVM's own notices: not the error.
_SPARK_LINE = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ |WARNING: |Picked up |Using Spark's default log4j)")


def driver_error(log_tail: str) -> str | None:
    """The last line the application itself wrote (a traceback's last line, a SystemExit's message), or None.

    Spark's own log lines after it (shutdown hooks, temp directories) are passed over.
    """
    for line in reversed(log_tail.splitlines()):
        text = line.strip()
        if text and not _SPARK_LINE.match(text) and not line.startswith((" ", "\t")):
            return text
    return None
