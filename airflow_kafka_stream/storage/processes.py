"""Is a process of a job alive? Answerable only on the host it runs on."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Mapping
from typing import Any

from airflow_kafka_stream.core.status_document import StatusDocument


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


def driver_gone(status: Mapping[str, Any] | StatusDocument | None) -> bool:
    """Whether a status's driver is known to be gone: its Python process (``pid``) and the JVM it drives
    (``jvm_pid``) both ran on this host and neither is alive.

    Both, because the JVM outlives its Python child for a moment and can still commit a batch then. A status
    without ``jvm_pid`` (an older runtime), or from another host, cannot be answered here: False, so the
    heartbeat alone decides.
    """
    document = StatusDocument.of(status)
    if document is None or document.jvm_pid is None:
        return False
    return (process_alive(document.pid, document.host) is False
            and process_alive(document.jvm_pid, document.host) is False)


def end_process(pid: object, host: object, grace_seconds: float = 5.0, group: bool = True) -> bool:
    """End a driver process of this host: SIGTERM, then SIGKILL after ``grace_seconds``; True once it is gone.

    With ``group`` the signal goes to its process group (a driver is started in a session of its own, so its
    JVM goes with it). False when it cannot be ended from here (another host, not permitted) or outlived
    both signals.
    """
    if process_alive(pid, host) is not True:
        return process_alive(pid, host) is False
    assert isinstance(pid, int)
    for sig, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 15.0)):
        try:
            (os.killpg if group else os.kill)(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        deadline = time.monotonic() + wait
        while process_alive(pid, host) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not process_alive(pid, host):
            return True
    return False
