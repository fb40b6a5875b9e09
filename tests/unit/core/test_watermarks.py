"""Invalid offset answers (librdkafka markers such as -1001, an end below the start) are never data:
the rules that recognise them, and the loop that asks again and then reports a Kafka error."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.watermarks import ask_until_valid, time_lookup_problem, watermark_problem
from airflow_kafka_stream.errors import KafkaAccessError


@pytest.mark.parametrize(
    ("bounds", "invalid"),
    [
        pytest.param((0, 0), False, id="1-empty-partition-is-valid"),
        pytest.param((5, 5), False, id="2-everything-deleted-by-retention-is-valid"),
        pytest.param((3, 17), False, id="3-ordinary-partition"),
        pytest.param((0, -1001), True, id="4-high-OFFSET_INVALID-the-reported-case"),
        pytest.param((-1001, -1001), True, id="5-both-OFFSET_INVALID"),
        pytest.param((-1, 10), True, id="6-low-OFFSET_END-is-a-start-position-not-an-offset"),
        pytest.param((0, -2), True, id="7-high-OFFSET_BEGINNING-marker"),
        pytest.param((12, 4), True, id="8-end-below-start-cannot-be-a-log"),
    ],
)
def test_watermark_problem(bounds, invalid):
    assert (watermark_problem(bounds) is not None) is invalid


def test_watermark_problem_names_the_marker():
    assert "-1001 (OFFSET_INVALID)" in watermark_problem((0, -1001))


@pytest.mark.parametrize(
    ("answer", "invalid"),
    [
        pytest.param((7, 10), False, id="1-a-record-at-or-after-the-time"),
        pytest.param((-1, 10), False, id="2-kafka-says-no-record-after-the-time"),
        pytest.param((0, 0), False, id="3-empty-partition"),
        pytest.param((-1001, 10), True, id="4-OFFSET_INVALID-is-no-answer"),
        pytest.param((3, -1001), True, id="5-high-watermark-marker"),
        pytest.param((-1, -1), True, id="6-high-watermark-OFFSET_END"),
    ],
)
def test_time_lookup_problem(answer, invalid):
    assert (time_lookup_problem(answer) is not None) is invalid


class Clock:
    """A clock that only moves when the loop sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def scripted(*rounds: dict):
    asked: list[list[str]] = []

    def ask(pending: list[str]) -> dict:
        asked.append(list(pending))
        answers = rounds[min(len(asked), len(rounds)) - 1]
        return {key: answers[key] for key in pending}

    return ask, asked


def test_invalid_answers_are_asked_again_for_those_partitions_only():
    ask, asked = scripted({"a:0": (0, 10), "a:1": (0, -1001)}, {"a:1": (0, 7)})
    clock = Clock()
    result = ask_until_valid(ask, ["a:0", "a:1"], watermark_problem, 5.0, "test", clock=clock, sleep=clock.sleep)
    assert result == {"a:0": (0, 10), "a:1": (0, 7)}
    assert asked == [["a:0", "a:1"], ["a:1"]]


def test_answers_that_stay_invalid_become_a_kafka_error_after_the_budget():
    ask, asked = scripted({"a:0": (0, -1001)})
    clock = Clock()
    with pytest.raises(KafkaAccessError, match=r"a:0: \[0, -1001 \(OFFSET_INVALID\)\) holds a marker.*not data loss"):
        ask_until_valid(ask, ["a:0"], watermark_problem, 3.0, "test", clock=clock, sleep=clock.sleep)
    assert clock.now == pytest.approx(3.0)  # the whole budget was used, no more
    assert max(clock.slept) <= 1.0  # backing off, but still asking every second at most
    assert len(asked) > 3


def test_a_zero_budget_asks_once():
    ask, asked = scripted({"a:0": (9, 3)})
    clock = Clock()
    with pytest.raises(KafkaAccessError, match="end 3 lies below its start 9"):
        ask_until_valid(ask, ["a:0"], watermark_problem, 0.0, "test", clock=clock, sleep=clock.sleep)
    assert len(asked) == 1


class LeaderMoved(Exception):
    """Stands for Kafka's "ask again" (FENCED_LEADER_EPOCH while a partition's leader moves)."""


def test_a_leader_moving_is_asked_again_not_raised():
    """A broker died and its partitions' leaders moved: Kafka says to ask again, so the job must not fail."""
    rounds = iter([LeaderMoved("FENCED_LEADER_EPOCH"), LeaderMoved("FENCED_LEADER_EPOCH"), {"a:0": (0, 10)}])

    def ask(pending: list[str]) -> dict:
        answer = next(rounds)
        if isinstance(answer, Exception):
            raise answer
        return answer

    clock = Clock()
    assert ask_until_valid(ask, ["a:0"], watermark_problem, 5.0, "test", clock=clock, sleep=clock.sleep,
                           retry_on=(LeaderMoved,)) == {"a:0": (0, 10)}
    assert len(clock.slept) == 2


def test_a_leader_that_stays_unknown_is_a_kafka_error_naming_kafkas_answer():
    def ask(pending: list[str]) -> dict:
        raise LeaderMoved("list watermarks: FENCED_LEADER_EPOCH")

    clock = Clock()
    with pytest.raises(KafkaAccessError, match=r"a:0: no answer \(list watermarks: FENCED_LEADER_EPOCH\).*transient"):
        ask_until_valid(ask, ["a:0"], watermark_problem, 2.0, "test", clock=clock, sleep=clock.sleep,
                        retry_on=(LeaderMoved,))


def test_other_errors_of_ask_propagate_at_once():
    def ask(pending: list[str]) -> dict:
        raise ValueError("not Kafka's to retry")

    with pytest.raises(ValueError):
        ask_until_valid(ask, ["a:0"], watermark_problem, 5.0, "test", retry_on=(LeaderMoved,))
