"""core.liveness: the one rule every reader of a status applies (status, job page, guards, submit, watchdog)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.liveness import Life, liveness, shown_state
from airflow_kafka_stream.core.status_document import StatusDocument

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def status(state: str = "RUNNING", beat_age: float | None = 2.0, **more) -> StatusDocument | None:
    doc = {"state": state, "pid": 11, "jvm_pid": 12, "host": "h1", **more}
    if beat_age is not None:
        doc["heartbeat_epoch"] = (NOW - timedelta(seconds=beat_age)).timestamp()
    return StatusDocument.parse(doc)


CASES = [
    # id, status, processes gone, expected, why
    ("1-no-status", None, None, Life.NO_STATUS, "a job that never reported is not alive"),
    ("2-stopped", status("STOPPED"), None, Life.ENDED, "a final state ends it, whatever the heartbeat"),
    ("2-failed-gone", status("FAILED"), True, Life.ENDED, "a driver that said it failed ended, it was not lost"),
    ("2-unknown-state", status("PAUSED"), None, Life.ENDED, "an unknown state is not running"),
    ("3-gone-here-fresh", status(beat_age=1), True, Life.GONE,
     "kill -9 on this host: dead at once, the fresh heartbeat is the dead driver's"),
    ("3-gone-starting", status("STARTING", beat_age=0), True, Life.GONE, "a starting driver can die too"),
    ("4-elsewhere-fresh", status(beat_age=1), None, Life.ALIVE,
     "another host: its pids mean nothing here, the heartbeat decides"),
    ("4-elsewhere-stale", status(beat_age=31), None, Life.STALE, "a heartbeat older than 30 s: died silently"),
    ("4-no-heartbeat", status(beat_age=None), None, Life.STALE, "no heartbeat proves no life"),
    ("4-slow-beater", status(beat_age=50, heartbeat_interval_seconds=15), None, Life.ALIVE,
     "a job beating every 15 s is allowed four intervals"),
    ("4-declared-skew", status(beat_age=38, clock_skew_seconds=10), None, Life.ALIVE,
     "the skew the job declared is added for readers on other hosts"),
    ("5-alive-here", status(beat_age=1), False, Life.ALIVE, "its processes are there and it beats"),
    ("5-future-beat", status(beat_age=-5), None, Life.ALIVE, "a heartbeat from the future (skew) counts as fresh"),
]


@pytest.mark.parametrize(("case", "doc", "gone", "expected", "why"), CASES, ids=[c[0] for c in CASES])
def test_liveness(case, doc, gone, expected, why):
    found = liveness(doc, now=NOW, processes_gone=gone, max_heartbeat_age=30.0)
    assert found.life is expected, f"{why}: {found.reason}"
    assert found.alive is (expected is Life.ALIVE)
    assert found.lost is (expected in (Life.GONE, Life.STALE))


SHOWN = [
    # id, status, processes gone, give-up reason, shown, recorded, words in the reason, why
    ("1-no-status", None, None, None, "NOT_STARTED", None, "never reported", "nothing to show but that"),
    ("2-gave-up-after-kill", status(beat_age=1), True, "gave up: 3 restart(s)", "GAVE_UP", "RUNNING",
     "gave up: 3 restart(s)", "a driver gone after recovery gave up: not RUNNING, and nothing restarts it"),
    ("2-gave-up-on-failed", status("FAILED"), None, "gave up: 3 restart(s)", "GAVE_UP", "FAILED", "gave up: 3",
     "the run failed and recovery gave up on it: the give-up is what matters now"),
    ("2-alive-again", status(beat_age=1), False, "gave up: 3 restart(s)", "RUNNING", "RUNNING", "is RUNNING",
     "a driver that lives is shown as it is, whatever was given up before"),
    ("3-dead-right-after-kill", status(beat_age=1), True, None, "DEAD", "RUNNING", "no longer exist",
     "kill -9 on this host: DEAD at once, with a 1 s old heartbeat (the job page said RUNNING)"),
    ("3-dead-stale", status(beat_age=95), None, None, "DEAD", "RUNNING", "no heartbeat for 95s",
     "another host, silent for 95 s: DEAD"),
    ("4-running", status(beat_age=1), False, None, "RUNNING", "RUNNING", "is RUNNING", "alive: as written"),
    ("4-stopped", status("STOPPED"), None, None, "STOPPED", "STOPPED", "is STOPPED", "ended and said so"),
    ("4-failed", status("FAILED"), None, None, "FAILED", "FAILED", "is FAILED",
     "failed, and recovery may still restart it"),
]


@pytest.mark.parametrize(("case", "doc", "gone", "gave_up", "shown", "recorded", "words", "why"), SHOWN,
                         ids=[c[0] for c in SHOWN])
def test_shown_state(case, doc, gone, gave_up, shown, recorded, words, why):
    found = shown_state(doc, liveness(doc, now=NOW, processes_gone=gone), gave_up)
    assert (found.state, found.recorded) == (shown, recorded), why
    assert words in found.reason, found.reason
