"""The Spark settings a job gets unless it sets them itself, and why each one.

``spark.python.unix.domain.socket.enabled`` (Spark 4.1+, off by Spark's default): the JVM talks to its
Python workers over a Unix domain socket instead of loopback TCP. Over TCP every Python task of a
reused worker waited about 40 ms before its first record: the JVM sends the task, then its small
input in a second write, which Nagle's algorithm holds until the worker acknowledges the first, and
the worker's kernel delays that acknowledgement by its 40 ms timer (measured with strace: the 620-byte
input of a data source read arrived 40 ms after the task). That stall was most of a small batch's
read, and of each extra task of a large one; a Unix socket has no such timer.
"""

from __future__ import annotations

from collections.abc import Mapping

PYTHON_WORKER_SOCKET = "spark.python.unix.domain.socket.enabled"

#: Settings a job's Spark conf gets when it does not name them (the job's own value always wins).
DEFAULT_SPARK_SETTINGS: Mapping[str, str] = {PYTHON_WORKER_SOCKET: "true"}


def with_default_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with every default it does not set itself."""
    return {**DEFAULT_SPARK_SETTINGS, **conf}
