"""Partition consumers kept in a Python worker from one micro-batch's task to the next.

A small batch's task spends more time making and closing its librdkafka consumer (threads,
bootstrap connection, metadata, connection to the leader, and a close that waits for them) than
reading a few hundred records. Spark keeps a Python worker between tasks
(``spark.python.worker.reuse``, on by default), so the worker can keep each partition's consumer
for the next batch, as Spark's JVM Kafka source caches consumers on executors. The rules:

1. One task at a time: a task takes the consumer out of the cache and gives it back only when it
   read its range to the end; a task that failed or was cancelled closes its consumer.
2. An idle consumer is unassigned: it fetches nothing and holds no records. The next task assigns
   it at its own start offset, so what it reads never depends on what the consumer read before
   (a range read by another worker meanwhile, a recreated topic, a partition that moved).
3. Keyed by topic, partition, the topic's id and the client settings (reader kind included):
   taking a partition's consumer with another key closes its idle ones with the old key. The id
   changes when a topic is deleted and created again, and a librdkafka 2.16 client that fetched
   the old topic crashes its process when pointed at the new one: such a consumer is only closed.
4. Idle consumers close after their idle timeout (a timer thread); past ``capacity`` idle
   consumers, the longest idle closes first.

Nothing here talks to Kafka: consumers come from a factory and are driven through
:class:`Reusable`, so the rules are unit-tested with stand-ins.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import NamedTuple, Protocol

from confluent_kafka import KafkaException

log = logging.getLogger(__name__)

#: Idle consumers kept at most per worker (Spark's spark.kafka.consumer.cache.capacity default).
CAPACITY = 64

#: What a broken or closed client raises (confluent-kafka's errors; RuntimeError from the C reader).
CLIENT_ERRORS = (KafkaException, RuntimeError)


class Reusable(Protocol):
    def assign(self, start: int | None) -> None:
        """Read from ``start`` on, dropping anything fetched before; None: stop fetching."""

    def close(self) -> None: ...


class CacheKey(NamedTuple):
    topic: str
    partition: int
    #: Everything that makes two consumers of one partition different (settings, reader kind).
    settings: Hashable


class CacheStats(NamedTuple):
    created: int
    reused: int
    closed: int
    idle: int


class ConsumerCache:
    """Idle consumers of one process by :class:`CacheKey`; see the module's rules."""

    def __init__(self, capacity: int = CAPACITY, clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self._idle: OrderedDict[CacheKey, tuple[Reusable, float]] = OrderedDict()  # key -> (consumer, deadline)
        self._timer: threading.Timer | None = None
        self._timer_at = float("inf")
        self._created = self._reused = self._closed = 0

    def take(self, key: CacheKey, start: int, open_new: Callable[[], Reusable]) -> Reusable:
        """The idle consumer for ``key`` assigned at ``start``, else a new one from ``open_new``
        (which must return it assigned at ``start``). The caller owns it until :meth:`give_back`."""
        with self._lock:
            found = self._idle.pop(key, None)
            outdated = [k for k in self._idle if (k.topic, k.partition) == (key.topic, key.partition)]
            stale = [self._idle.pop(k)[0] for k in outdated]
        self._close_all(stale, "its settings changed")
        if found is not None:
            consumer = found[0]
            try:
                consumer.assign(start)
            except CLIENT_ERRORS as exc:  # a broken client is not worth keeping: start afresh
                log.warning("kafka_stream: cached consumer of %s:%d refused a new start (%s); opening another",
                            key.topic, key.partition, exc)
                self._close_all([consumer], "it failed")
            else:
                with self._lock:
                    self._reused += 1
                return consumer
        consumer = open_new()
        with self._lock:
            self._created += 1
        return consumer

    def give_back(self, key: CacheKey, consumer: Reusable, idle_timeout: float) -> None:
        """Keep ``consumer`` (which read its range to the end) for the next task, unassigned."""
        try:
            consumer.assign(None)
        except CLIENT_ERRORS as exc:
            log.warning("kafka_stream: consumer of %s:%d could not stop fetching (%s); closing it",
                        key.topic, key.partition, exc)
            self._close_all([consumer], "it failed")
            return
        with self._lock:
            replaced = self._idle.pop(key, None)
            self._idle[key] = (consumer, self._clock() + idle_timeout)
            surplus = [self._idle.popitem(last=False)[1][0] for _ in range(len(self._idle) - self._capacity)]
            self._schedule_locked()
        self._close_all([replaced[0]] if replaced else [], "another took its place")
        self._close_all(surplus, "the cache is full")

    def close_idle(self, everything: bool = False) -> int:
        """Close the consumers idle past their deadline (all idle ones with ``everything``); how many."""
        with self._lock:
            now = self._clock()
            due = [k for k, (_c, deadline) in self._idle.items() if everything or deadline <= now]
            expired = [self._idle.pop(k)[0] for k in due]
            self._timer, self._timer_at = None, float("inf")
            self._schedule_locked()
        self._close_all(expired, "it was idle")
        return len(expired)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._created, self._reused, self._closed, len(self._idle))

    def _schedule_locked(self) -> None:
        """Keep one timer thread for the earliest idle deadline (called holding the lock)."""
        if not self._idle:
            return
        earliest = min(deadline for _c, deadline in self._idle.values())
        if earliest >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = earliest
        self._timer = threading.Timer(max(0.0, earliest - self._clock()), self.close_idle)
        self._timer.daemon = True
        self._timer.start()

    def _close_all(self, consumers: list[Reusable], why: str) -> None:
        for consumer in consumers:
            try:
                consumer.close()
            except CLIENT_ERRORS as exc:  # closing is best effort: the process may be going away
                log.warning("kafka_stream: closing a cached consumer (%s) failed: %s", why, exc)
            with self._lock:
                self._closed += 1
        if consumers:
            log.info("kafka_stream: closed %d cached consumer(s): %s", len(consumers), why)


#: The consumers of this Python worker.
CONSUMERS = ConsumerCache()
