"""A piece of work a driver does on a thread of its own, at most once per interval, when asked.

The lag sampler and the time-lag sampler look at Kafka after batches and heartbeats: never on the query's
thread (a slow broker must not delay a batch), never more often than their interval (each look costs
requests), and only the newest request counts (a look replaces the one not taken yet). Closing wakes the
thread and waits for it to end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class PacedThread:
    """Runs ``work`` on a daemon thread named ``name`` after each :meth:`kick`, at most once per ``interval``
    seconds since the work last began (:meth:`began` marks it)."""

    def __init__(self, name: str, work: Callable[[], object], interval: float) -> None:
        self._name, self._work, self._interval = name, work, interval
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self.thread: threading.Thread | None = None
        self._last_at = float("-inf")

    @property
    def closing(self) -> bool:
        return self._closing

    def began(self) -> None:
        """The work began now: the next may begin an interval later."""
        self._last_at = time.monotonic()

    def kick(self) -> bool:
        """Ask for the work (the thread starts at the first ask); False once closing."""
        with self._lock:
            if self._closing:
                return False
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self.thread.start()
        self._wake.set()
        return True

    def close(self, timeout: float) -> bool:
        """Stop the thread, waiting up to ``timeout`` for a look in progress; True when it has ended."""
        with self._lock:
            self._closing = True
            thread = self.thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            deadline = self._last_at + self._interval
            while not self._closing and (remaining := deadline - time.monotonic()) > 0:
                self._wake.wait(remaining)  # a newer ask replaces the pending one meanwhile
                self._wake.clear()
            if self._closing:
                return
            self._work()
