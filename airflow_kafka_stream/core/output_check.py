"""Verify's look at a transactional Kafka sink's output topic: is a transaction open on it?

A partition whose last stable offset (the end a ``read_committed`` consumer reads to) is behind its high
watermark holds an open transaction: every ``read_committed`` consumer of the topic waits at that offset until
it commits or aborts. While the job runs, its batch's own transaction is open for the batch's length; a job
that is not running has none of its own open, so an open transaction on its output then is a finding (a killed
driver's, left open until the next driver of the job starts its sink or the transaction times out; or another
producer's). The broker can say whose transaction it is, but librdkafka has no DescribeTransactions: the finding
names the job's transactional id and Kafka's own tool, which can.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OutputCheck:
    """The output topic's last stable offset and high watermark per partition, and whether the job runs."""

    topic: str
    ends: Mapping[int, tuple[int, int]]  # partition -> (last stable offset, high watermark)
    job_running: bool
    transactional_id: str | None = None  # the job's writer (its sink's transactional id)

    @property
    def open_partitions(self) -> list[int]:
        return sorted(p for p, (stable, high) in self.ends.items() if stable < high)

    @property
    def problem(self) -> bool:
        """An open transaction on the output of a job that is not running."""
        return bool(self.open_partitions) and not self.job_running

    def describe(self) -> str:
        if not self.open_partitions:
            return (f"output topic {self.topic}: no open transaction (the last stable offset is the high watermark "
                    f"on all {len(self.ends)} partitions)")
        behind = ", ".join(f"{p} ({self.ends[p][1] - self.ends[p][0]} offsets)" for p in self.open_partitions)
        if self.job_running:
            return (f"output topic {self.topic}: a transaction is open on partition(s) {behind}, as while the running "
                    "job writes its batch")
        whose = ""
        if self.transactional_id:
            whose = (f"; `kafka-transactions.sh describe --transactional-id {self.transactional_id}` says whether it "
                     "is the job's writer (`find-hanging` and `abort` end another producer's)")
        return (f"output topic {self.topic}: PROBLEM: a transaction is open on partition(s) {behind} while the job is "
                "not running; read_committed consumers wait there until it ends: start the job (its sink aborts what "
                f"an earlier driver left open) or wait out the transaction timeout{whose}")

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "transactional_id": self.transactional_id, "job_running": self.job_running,
                "open_partitions": self.open_partitions,
                "partitions": {str(p): {"last_stable_offset": s, "high_watermark": h}
                               for p, (s, h) in sorted(self.ends.items())}, "problem": self.problem}
