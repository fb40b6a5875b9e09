"""Whether an answer about a partition's offsets is one, and asking again until it is.

librdkafka reports "no offset" with markers, not offsets: -1001 (OFFSET_INVALID),
-1 (OFFSET_END), -2 (OFFSET_BEGINNING), -1000 (OFFSET_STORED). An overloaded broker
or a client in the middle of a metadata refresh can hand such a marker back as a
partition's watermark, or answer a pair whose end lies below its start. Such an
answer says nothing about the partition. Taking it as data would be harmful:
"the end offset went backwards" fails a query that lost nothing, and with
failOnDataLoss=false it moves the query's position and replays data. So an invalid
answer is asked again within the caller's time budget, and if it stays invalid
the caller reports a transient Kafka problem, never data loss.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

from airflow_kafka_stream.errors import KafkaAccessError

#: librdkafka's offset markers, by the name its documentation gives them.
MARKERS = {-1: "OFFSET_END", -2: "OFFSET_BEGINNING", -1000: "OFFSET_STORED", -1001: "OFFSET_INVALID"}

#: Kafka's ListOffsets answer for "no record at or after that time".
NO_RECORD_FOR_TIME = -1

#: First pause between two questions; it doubles up to MAX_BACKOFF (the broker is busy: do not add load).
FIRST_BACKOFF = 0.1
MAX_BACKOFF = 1.0

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def describe_offset(value: int) -> str:
    """An offset as a reader should see it: markers by name."""
    return f"{value} ({MARKERS[value]})" if value in MARKERS else str(value)


def watermark_problem(bounds: tuple[int, int]) -> str | None:
    """Why ``(low, high)`` is not a partition's watermarks, or None when it is.

    Rules: 1. every watermark is an offset (>= 0), never a marker;
    2. the end is never below the start (Kafka keeps log start <= high watermark).
    """
    low, high = bounds
    if low < 0 or high < 0:
        return f"[{describe_offset(low)}, {describe_offset(high)}) holds a marker, not an offset"
    if high < low:
        return f"its end {high} lies below its start {low}"
    return None


def time_lookup_problem(answer: tuple[int, int]) -> str | None:
    """Why ``(offset for a time, high watermark)`` is not an answer, or None when it is.

    The offset is an offset or Kafka's -1 for "no record at or after the time"; the high watermark is an offset.
    """
    found, high = answer
    if high < 0:
        return f"high watermark {describe_offset(high)} is a marker, not an offset"
    if found < 0 and found != NO_RECORD_FOR_TIME:
        return f"offset for the time {describe_offset(found)} is a marker, not an offset"
    return None


def ask_until_valid(
    ask: Callable[[list[K]], Mapping[K, V]],
    keys: Iterable[K],
    problem: Callable[[V], str | None],
    budget: float,
    what: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    retry_on: tuple[type[BaseException], ...] = (),
) -> dict[K, V]:
    """Answers for every key, asking again (only for the keys answered invalidly) for up to ``budget`` seconds.

    ``ask`` gets the keys still wanted and returns an answer for each; its own errors propagate, except those of
    ``retry_on`` (Kafka's "ask again": a partition's leader is moving), which count as no answer for every key.
    When answers stay invalid, raises KafkaAccessError naming each key and its last answer.
    """
    deadline = clock() + budget
    pending = list(keys)
    settled: dict[K, V] = {}
    backoff = FIRST_BACKOFF
    while True:
        try:
            answers = ask(pending)
        except retry_on as exc:
            answers, invalid = {}, dict.fromkeys(pending, f"no answer ({exc})")
        else:
            invalid = {}
        for key in pending if answers else ():
            why = problem(answers[key])
            if why is None:
                settled[key] = answers[key]
            else:
                invalid[key] = why
        if not invalid:
            return settled
        pending = list(invalid)
        wait = min(backoff, deadline - clock())
        if wait <= 0:
            detail = "; ".join(f"{key}: {why}" for key, why in invalid.items())
            raise KafkaAccessError(
                f"Kafka kept answering invalid offsets when asked to {what} for {budget:g}s ({detail}). This is a "
                "transient broker or client problem (overload, leader change), not data loss: nothing was decided "
                "from these answers. Retry; if it persists, check the brokers' health"
            )
        sleep(wait)
        backoff = min(backoff * 2, MAX_BACKOFF)
