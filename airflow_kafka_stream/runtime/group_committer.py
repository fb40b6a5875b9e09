"""Commit the query's progress to the Kafka consumer group, from the driver.

Spark does not need the group's committed offsets (its checkpoint is the truth);
they are for monitoring and for tools that only understand consumer groups. So
a commit must never hold the query back: batches hand their end offsets to a
:class:`GroupCommitter`, whose own thread commits them. When commits are slow
or failing only the newest offsets matter, so a new batch *replaces* the
pending offsets instead of queueing behind them: memory stays constant however
long the broker is unreachable (a growing queue of pending commits is a known
way for Flink's Kafka source to run out of memory).

Offsets are committed as they are: Spark's offsets and Kafka's committed offsets
both mean "next offset to read", so never +1.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.offsets import PartitionOffsets, to_nested
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.groups import commit_through, standalone_consumer

log = logging.getLogger(__name__)

CommitFn = Callable[[PartitionOffsets], None]


@dataclass(frozen=True)
class _Pending:
    batch_id: int
    offsets: PartitionOffsets


class GroupCommitter:
    """Holds at most one pending commit (the newest) and commits it on its own thread.

    ``commit_fn(offsets)`` performs one commit and raises on failure. The pure
    part (:meth:`submit`, :meth:`commit_pending`) can be driven without the
    thread, which is how the unit tests drive it.
    """

    def __init__(self, commit_fn: CommitFn, *, retry_backoff_seconds: float = 1.0,
                 max_backoff_seconds: float = 30.0, clock: Callable[[], datetime] | None = None):
        self._commit_fn = commit_fn
        self._retry_backoff = retry_backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._closing = False
        self._thread: threading.Thread | None = None
        self._pending: _Pending | None = None
        self.successes = 0
        self.failures = 0
        self.replaced = 0
        self.consecutive_failures = 0
        self.last_error: str | None = None
        self.last_error_at: str | None = None
        self.committed_batch: int | None = None
        self.committed_offsets: PartitionOffsets | None = None
        self.committed_at: str | None = None

    # -- the pure part -------------------------------------------------------------------------
    def submit(self, batch_id: int, offsets: Mapping) -> bool:
        """Make these the offsets to commit next, replacing any pending ones.

        Offsets of a batch older than the pending one are ignored (listener
        events can arrive late); returns whether they were taken.
        """
        with self._lock:
            pending = self._pending
            if pending is not None and batch_id < pending.batch_id:
                return False
            if pending is not None:
                self.replaced += 1
            self._pending = _Pending(batch_id, dict(offsets))
        self._wake.set()
        return True

    @property
    def pending_batch(self) -> int | None:
        pending = self._pending
        return pending.batch_id if pending else None

    def commit_pending(self) -> bool:
        """Try once to commit the pending offsets; True when nothing is left pending.

        The pending entry is cleared only after a successful commit and only if
        no newer one replaced it meanwhile, so a failure never loses the newest offsets.
        """
        with self._lock:
            pending = self._pending
        if pending is None:
            return True
        try:
            self._commit_fn(pending.offsets)
        except Exception as exc:  # noqa: BLE001 - any failure is counted, shown and retried
            with self._lock:
                self.failures += 1
                self.consecutive_failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"[:500]
                self.last_error_at = self._clock().isoformat()
            log.warning("committing batch %d to the consumer group failed (%d in a row): %s",
                        pending.batch_id, self.consecutive_failures, self.last_error)
            return False
        with self._lock:
            self.successes += 1
            self.consecutive_failures = 0
            self.committed_batch = pending.batch_id
            self.committed_offsets = pending.offsets
            self.committed_at = self._clock().isoformat()
            if self._pending is pending:
                self._pending = None
            self._idle.notify_all()
            return self._pending is None

    def stats(self) -> dict[str, Any]:
        """Counters for the status file."""
        with self._lock:
            return {
                "successes": self.successes,
                "failures": self.failures,
                "replaced_while_pending": self.replaced,
                "consecutive_failures": self.consecutive_failures,
                "last_error": self.last_error,
                "last_error_at": self.last_error_at,
                "committed_batch": self.committed_batch,
                "committed_offsets": to_nested(self.committed_offsets) if self.committed_offsets else None,
                "committed_at": self.committed_at,
                "pending_batch": self._pending.batch_id if self._pending else None,
            }

    # -- the thread ----------------------------------------------------------------------------
    def start(self) -> GroupCommitter:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="group-committer", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        backoff = self._retry_backoff
        while not self._closing:
            self._wake.wait()
            self._wake.clear()
            while not self._closing and not self.commit_pending():
                # Waiting is interruptible: a newer batch or close() wakes us for another try.
                self._wake.wait(backoff)
                self._wake.clear()
                backoff = min(backoff * 2, self._max_backoff)
            backoff = self._retry_backoff

    def flush(self, timeout: float) -> bool:
        """Wait until nothing is pending; False if offsets are still pending after ``timeout``."""
        if self._thread is None:
            return self.commit_pending()
        deadline = time.monotonic() + timeout
        self._wake.set()
        with self._lock:
            while self._pending is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.5))
                self._wake.set()
            return True

    def discard(self) -> None:
        """Drop the pending commit (a driver another one superseded: the group is the other driver's now)."""
        with self._lock:
            self._pending = None
            self._idle.notify_all()

    def close(self, timeout: float = 10.0) -> bool:
        """Commit what is pending (up to ``timeout``), then stop the thread."""
        flushed = self.flush(timeout)
        self._closing = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(1.0)
        closer = getattr(self._commit_fn, "close", None)
        if callable(closer) and (self._thread is None or not self._thread.is_alive()):
            closer()  # the commit function's Kafka client; a thread still committing keeps it open
        return flushed


class KafkaGroupCommit:
    """A commit function that commits offsets for ``group_id`` as a standalone consumer.

    The consumer never subscribes, so it never joins the group (Spark assigns
    partitions itself); Kafka accepts such commits while the group has no
    members. One consumer is kept and reused for every commit.
    """

    def __init__(self, client_config: Mapping[str, Any], group_id: str):
        if not client_config.get("bootstrap.servers"):
            raise InvalidInputError(
                "config['bootstrap.servers'] must be provided to commit offsets to the consumer group "
                "(set the source option kafka.bootstrap.servers)"
            )
        if not group_id:
            raise InvalidInputError("a consumer group id is needed to commit offsets; set the job's group")
        self.group_id = group_id
        # librdkafka's log lines go to Python logging at its default level (6), as before.
        self._config = {**dict(client_config), "logger": logging.getLogger(f"{__name__}.librdkafka"), "log_level": 6}
        self._consumer = None

    def __call__(self, offsets: PartitionOffsets) -> None:
        if self._consumer is None:
            self._consumer = standalone_consumer(self._config, self.group_id)
        try:
            commit_through(self._consumer, self._config, self.group_id, offsets)
        finally:
            self._consumer.poll(0)  # deliver librdkafka's log lines to Python logging

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception as exc:  # noqa: BLE001 - closing is best effort
                log.warning("closing the group-commit consumer failed: %s", exc)
            self._consumer = None
