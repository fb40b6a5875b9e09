"""The one polling loop every trigger runs (``triggers.polling.poll_until_done``): one event, whatever ends it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.triggers.polling import poll_until_done


@dataclass
class Looks:
    """A trigger whose looks say, in turn, what ``answers`` holds (an exception is raised)."""

    answers: list
    timeout_seconds: float | None = 5.0
    poll_seconds: float = 0.01
    taken: int = 0
    lines: list = field(default_factory=list)

    def poll(self):
        answer = self.answers[min(self.taken, len(self.answers) - 1)]
        self.taken += 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    def log(self, text, *args):
        self.lines.append(text % args)


def run(trigger: Looks, **kwargs) -> list[dict]:
    async def collect():
        return [event.payload async for event in poll_until_done(trigger, trigger.log, "job j", "the job", **kwargs)]
    return asyncio.run(collect())


def waiting(message: str) -> dict:
    return {"status": WaitStatus.WAITING, "message": message}


def test_the_first_look_that_is_not_waiting_ends_the_wait_and_a_changed_message_is_logged_once():
    trigger = Looks([waiting("starting"), waiting("starting"), waiting("1 batch"), {"status": "success",
                                                                                   "message": "RUNNING"}])
    assert run(trigger) == [{"status": "success", "message": "RUNNING"}]
    assert trigger.taken == 4
    assert trigger.lines == ["job j: starting", "job j: 1 batch", "job j: RUNNING"]


def test_a_failed_look_ends_the_wait_with_an_error_event_naming_what_it_could_not_read():
    [event] = run(Looks([waiting("x"), OSError("disk gone")]), on_error={"action": None})
    assert event == {"status": WaitStatus.ERROR, "message": "cannot read the job: disk gone", "job": {"state": None},
                     "action": None}


def test_the_timeout_ends_the_wait_saying_what_the_last_look_saw():
    [event] = run(Looks([waiting("lag 40")], timeout_seconds=0.05))
    assert event["status"] == WaitStatus.TIMEOUT and event["last_look"] == "lag 40", event


def test_no_timeout_means_the_watch_lasts_until_a_look_ends_it():
    trigger = Looks([waiting("alive")] * 30 + [{"status": "due", "message": "dead"}], timeout_seconds=None,
                    poll_seconds=0.001)
    assert run(trigger) == [{"status": "due", "message": "dead"}] and trigger.taken == 31
