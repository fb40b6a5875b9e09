"""Work that must not slow a job sharing the host: run on a thread of its own at a lower CPU priority.

A live savepoint copies (and hashes) the checkpoint of a running job, usually from the host the job's driver
runs on (the Airflow worker that launched it, or the terminal of ``savepoint create``). On Linux a thread's
nice value is its own, so raising it on a fresh thread leaves the calling process as it was; the thread ends
with the work (a raised nice value cannot be lowered again without privileges).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The nice value the work runs at (or the caller's, when higher): the scheduler then gives a busy job's threads
#: about ten times its share.
BACKGROUND_NICENESS = 10


def run_at_low_priority(work: Callable[[], T], name: str) -> T:
    """``work()`` on a thread named ``name`` at nice :data:`BACKGROUND_NICENESS`; its result or its exception."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=name) as pool:  # the thread ends with the pool
        return pool.submit(_niced, work, name).result()


def _niced(work: Callable[[], T], name: str) -> T:
    try:
        thread_id = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread_id, max(os.getpriority(os.PRIO_PROCESS, thread_id),
                                                      BACKGROUND_NICENESS))
    except (AttributeError, OSError) as exc:  # not Linux, or not allowed: the work runs at normal priority
        log.info("%s runs at normal priority (could not lower it: %s)", name, exc)
    return work()
