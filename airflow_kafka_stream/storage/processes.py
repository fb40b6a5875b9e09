"""Is a process of a job alive? Answerable only on the host it runs on."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any


def process_alive(pid: object, host: object) -> bool | None:
    """True or False for a process of this host; None when it ran elsewhere (or the pid is unusable).

    A child of the calling process that has exited stays a zombie until it is reaped: it counts as gone.
    """
    if host != socket.gethostname() or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return not stat.read().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def driver_gone(status: Mapping[str, Any] | None) -> bool:
    """Whether a status's driver is known to be gone: its Python process (``pid``) and the JVM it drives
    (``jvm_pid``) both ran on this host and neither is alive.

    Both, because the JVM outlives its Python child for a moment and can still commit a batch then. A status
    without ``jvm_pid`` (an older runtime), or from another host, cannot be answered here: False, so the
    heartbeat alone decides.
    """
    if not status or status.get("jvm_pid") is None:
        return False
    host = status.get("host")
    return process_alive(status.get("pid"), host) is False and process_alive(status.get("jvm_pid"), host) is False
