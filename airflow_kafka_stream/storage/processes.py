"""Is a process of a job alive? Answerable only on the host it runs on."""

from __future__ import annotations

import os
import socket


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
