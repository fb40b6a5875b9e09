"""The group committer keeps only the newest offsets pending and never loses them on failure."""

from __future__ import annotations

import threading

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.runtime.group_committer import GroupCommitter

TP0 = TopicPartition("events", 0)


def offs(n: int) -> dict:
    return {TP0: n}


class FakeBroker:
    """A commit function that fails while ``down`` and records what it committed."""

    def __init__(self):
        self.down = False
        self.committed: list[dict] = []
        self.calls = 0

    def __call__(self, offsets):
        self.calls += 1
        if self.down:
            raise ConnectionError("broker unreachable")
        self.committed.append(dict(offsets))


# Each step: ("submit", batch, offset) | ("commit",) | ("down",) | ("up",)
@pytest.mark.parametrize(
    ("steps", "committed", "pending", "successes", "failures"),
    [
        pytest.param([("submit", 0, 10), ("commit",)], [10], None, 1, 0,
                     id="1-one-batch-commits-its-end-offsets-unchanged-not-plus-one"),
        pytest.param([("submit", 0, 10), ("submit", 1, 20), ("submit", 2, 30), ("commit",)], [30], None, 1, 0,
                     id="2-batches-arriving-faster-than-commits-collapse-to-the-newest"),
        pytest.param([("down",), ("submit", 0, 10), ("commit",), ("commit",)], [], 0, 0, 2,
                     id="3-failure-keeps-the-offsets-pending-for-a-retry"),
        pytest.param([("down",), ("submit", 0, 10), ("commit",), ("submit", 1, 20), ("up",), ("commit",)],
                     [20], None, 1, 1,
                     id="4-after-an-outage-only-the-newest-offsets-are-committed"),
        pytest.param([("submit", 5, 50), ("submit", 4, 40), ("commit",)], [50], None, 1, 0,
                     id="5-a-late-event-for-an-older-batch-does-not-move-offsets-back"),
        pytest.param([("submit", 3, 30), ("commit",), ("submit", 3, 30), ("commit",)], [30, 30], None, 2, 0,
                     id="6-the-final-commit-may-repeat-the-last-batch-idempotently"),
        pytest.param([("commit",)], [], None, 0, 0, id="7-nothing-pending-commits-nothing"),
    ],
)
def test_replace_dont_queue(steps, committed, pending, successes, failures):
    broker = FakeBroker()
    committer = GroupCommitter(broker)
    for step in steps:
        if step[0] == "submit":
            committer.submit(step[1], offs(step[2]))
        elif step[0] == "commit":
            committer.commit_pending()
        else:
            broker.down = step[0] == "down"
    assert [c[TP0] for c in broker.committed] == committed
    assert committer.pending_batch == pending
    assert (committer.successes, committer.failures) == (successes, failures)


def test_pending_stays_one_entry_however_long_the_outage():
    broker = FakeBroker()
    broker.down = True
    committer = GroupCommitter(broker)
    for batch in range(10_000):
        committer.submit(batch, offs(batch))
        if batch % 100 == 0:
            committer.commit_pending()
    stats = committer.stats()
    assert stats["pending_batch"] == 9_999
    assert stats["failures"] == 100
    assert "ConnectionError: broker unreachable" in stats["last_error"]
    broker.down = False
    assert committer.commit_pending()
    assert broker.committed == [offs(9_999)]
    assert committer.stats()["committed_offsets"] == {"events": {"0": 9_999}}


def test_offsets_submitted_during_a_commit_are_not_lost():
    """A batch that arrives while an older commit is in flight stays pending afterwards."""
    committer: GroupCommitter

    def commit_and_race(offsets):
        if offsets == offs(10):
            committer.submit(1, offs(20))

    committer = GroupCommitter(commit_and_race)
    committer.submit(0, offs(10))
    assert committer.commit_pending() is False
    assert committer.pending_batch == 1
    assert committer.commit_pending() is True
    assert committer.committed_batch == 1


def test_thread_commits_and_flush_waits_for_it():
    done = threading.Event()
    broker = FakeBroker()

    def commit(offsets):
        broker(offsets)
        done.set()

    committer = GroupCommitter(commit).start()
    try:
        committer.submit(0, offs(7))
        assert committer.flush(5.0)
        assert done.is_set() and broker.committed == [offs(7)]
    finally:
        assert committer.close(1.0)


def test_flush_gives_up_after_timeout_while_the_broker_is_down():
    broker = FakeBroker()
    broker.down = True
    committer = GroupCommitter(broker, retry_backoff_seconds=0.01, max_backoff_seconds=0.05).start()
    committer.submit(0, offs(1))
    assert committer.close(0.3) is False
    assert committer.failures >= 2 and committer.pending_batch == 0
