"""The rules of the executor-side consumer cache, driven with stand-in consumers and a fake clock."""

from __future__ import annotations

import threading

import pytest

from airflow_kafka_stream.source.consumer_cache import CacheKey, CacheStats, ConsumerCache


class Stub:
    """Records what the cache does to a consumer."""

    def __init__(self, name: str, refuse: bool = False) -> None:
        self.name = name
        self.assigned: list[int | None] = []
        self.closed = False
        self.refuse = refuse

    def assign(self, start: int | None) -> None:
        if self.refuse:
            raise RuntimeError("PartitionReader is closed")
        self.assigned.append(start)

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


A = CacheKey("orders", 0, ("native", "settings-1"))
A_OTHER_SETTINGS = CacheKey("orders", 0, ("native", "settings-2"))
B = CacheKey("orders", 1, ("native", "settings-1"))


def opener(made: list[Stub]):
    def open_new() -> Stub:
        made.append(Stub(f"c{len(made)}"))
        return made[-1]

    return open_new


def test_a_consumer_given_back_is_taken_again_at_the_new_start_and_stops_fetching_while_idle():
    cache, made = ConsumerCache(clock=Clock()), []
    first = cache.take(A, 0, opener(made))
    cache.give_back(A, first, idle_timeout=60)
    second = cache.take(A, 100, opener(made))
    assert second is first and len(made) == 1
    assert first.assigned == [None, 100]  # unassigned while idle, then assigned at the new start
    assert cache.stats() == CacheStats(created=1, reused=1, closed=0, idle=0)


def test_a_taken_consumer_is_never_handed_to_a_second_task():
    cache, made = ConsumerCache(clock=Clock()), []
    first = cache.take(A, 0, opener(made))
    second = cache.take(A, 0, opener(made))
    assert first is not second and len(made) == 2
    cache.give_back(A, first, 60)
    cache.give_back(A, second, 60)  # the one kept is the newest; the other is closed
    assert first.closed and not second.closed
    assert cache.stats().idle == 1


def test_other_partitions_get_their_own_consumer():
    cache, made = ConsumerCache(clock=Clock()), []
    cache.give_back(A, cache.take(A, 0, opener(made)), 60)
    other = cache.take(B, 0, opener(made))
    assert other is made[1] and cache.stats().idle == 1


def test_new_settings_close_the_partitions_consumers_with_the_old_ones():
    cache, made = ConsumerCache(clock=Clock()), []
    old = cache.take(A, 0, opener(made))
    cache.give_back(A, old, 60)
    new = cache.take(A_OTHER_SETTINGS, 5, opener(made))
    assert new is not old and old.closed
    assert cache.stats() == CacheStats(created=2, reused=0, closed=1, idle=0)


def test_idle_consumers_close_after_their_timeout():
    clock = Clock()
    cache, made = ConsumerCache(clock=clock), []
    cache.give_back(A, cache.take(A, 0, opener(made)), idle_timeout=30)
    clock.now += 29
    assert cache.close_idle() == 0 and not made[0].closed
    clock.now += 2
    assert cache.close_idle() == 1 and made[0].closed
    assert cache.take(A, 0, opener(made)) is made[1]


def test_the_idle_timer_closes_consumers_without_another_task():
    cache, made = ConsumerCache(), []
    cache.give_back(A, cache.take(A, 0, opener(made)), idle_timeout=0.05)
    closed = threading.Event()
    made[0].close = closed.set  # type: ignore[method-assign]
    assert closed.wait(5), "the idle consumer was not closed by the timer"
    assert cache.stats().idle == 0


def test_past_capacity_the_longest_idle_closes_first():
    cache, made = ConsumerCache(capacity=2, clock=Clock()), []
    keys = [CacheKey("t", p, "s") for p in range(3)]
    taken = [cache.take(key, 0, opener(made)) for key in keys]
    for key, consumer in zip(keys, taken, strict=True):
        cache.give_back(key, consumer, 60)
    assert [c.closed for c in made] == [True, False, False]


@pytest.mark.parametrize("when", ["take", "give_back"])
def test_a_consumer_that_refuses_an_assignment_is_closed_not_kept(when):
    cache, made = ConsumerCache(clock=Clock()), []
    consumer = cache.take(A, 0, opener(made))
    if when == "give_back":
        consumer.refuse = True
        cache.give_back(A, consumer, 60)
        assert consumer.closed and cache.stats().idle == 0
    else:
        cache.give_back(A, consumer, 60)
        consumer.refuse = True
        replacement = cache.take(A, 7, opener(made))
        assert consumer.closed and replacement is made[1]
