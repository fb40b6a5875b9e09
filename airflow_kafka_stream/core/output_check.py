"""Verify's look at a transactional Kafka sink's output topic: is a transaction open on it, and whose is it?

A partition whose last stable offset (the end a ``read_committed`` consumer reads to) is behind its high
watermark holds an open transaction: every ``read_committed`` consumer of the topic waits at that offset until
it commits or aborts. While the job runs, its batch's own transaction is open for the batch's length; a job
that is not running has none of its own open, so an open transaction on its output then is a finding (a killed
driver's, left open until the next driver of the job starts its sink or the transaction timeout passes; or
another producer's). When a partition is held, the broker says by whom (Kafka's DescribeProducers, then
ListTransactions and DescribeTransactions, as ``kafka-transactions.sh find-hanging`` asks; librdkafka has none
of them, so kafka.transaction_holders asks through Kafka's Java client): each holder is the job's writer or
another producer, and a holder the coordinator no longer knows as open, or open past its own timeout, hangs: it
holds every ``read_committed`` reader of the partition until an operator aborts it, running job or not.

Pure: the observations come in, the judgement and its words go out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

#: The coordinator's states of a transaction that is still open (its markers are not written yet).
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})
#: How long past its own timeout an open transaction may be before it counts as hanging: the coordinator aborts
#: expired transactions on a periodic check (``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
#: 10 s by default), so a just-expired one is not a finding yet.
EXPIRY_GRACE_MS = 60_000


@dataclass(frozen=True)
class Holder:
    """A producer whose open transaction holds a partition of the output (from offset ``start_offset``)."""

    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    #: What the transaction coordinator says of this producer: its transactional id, the transaction's state,
    #: when it began (ms since the epoch) and its timeout; all None when no coordinator knows the producer.
    transactional_id: str | None = None
    state: str | None = None
    started_ms: int | None = None
    timeout_ms: int | None = None

    def open_for_ms(self, now_ms: int) -> int | None:
        return None if self.started_ms is None else max(0, now_ms - self.started_ms)

    def hanging(self, now_ms: int) -> bool:
        """The coordinator does not know this transaction as open, or it is open well past its own timeout: no
        commit or abort is coming, and only an operator's abort frees the partition."""
        if self.state not in OPEN_STATES:
            return True
        age = self.open_for_ms(now_ms)
        return age is not None and self.timeout_ms is not None and age > self.timeout_ms + EXPIRY_GRACE_MS

    def name(self) -> str:
        who = f"transactional id {self.transactional_id}" if self.transactional_id else "no known transactional id"
        return f"producer {self.producer_id} (epoch {self.producer_epoch}, {who})"

    def to_dict(self, now_ms: int, job_writer: bool) -> dict[str, Any]:
        return {"partition": self.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "start_offset": self.start_offset,
                "transactional_id": self.transactional_id, "state": self.state, "started_ms": self.started_ms,
                "open_for_ms": self.open_for_ms(now_ms), "timeout_ms": self.timeout_ms,
                "job_writer": job_writer, "hanging": self.hanging(now_ms)}


@dataclass(frozen=True)
class OutputCheck:
    """The output topic's last stable offset and high watermark per partition, whether the job runs, and (when
    a partition is held and the broker could be asked) who holds it."""

    topic: str
    ends: Mapping[int, tuple[int, int]]  # partition -> (last stable offset, high watermark)
    job_running: bool
    transactional_id: str | None = None  # the job's writer (its sink's transactional id)
    holders: tuple[Holder, ...] | None = None  # None: not asked (nothing held) or not answered (see unanswered)
    unanswered: str | None = None  # why the holders of a held partition could not be asked, when they could not
    now_ms: int = 0  # when the holders were asked

    @property
    def open_partitions(self) -> list[int]:
        return sorted(p for p, (stable, high) in self.ends.items() if stable < high)

    def is_job_writer(self, holder: Holder) -> bool:
        return self.transactional_id is not None and holder.transactional_id == self.transactional_id

    @property
    def hanging(self) -> list[Holder]:
        return [h for h in self.holders or () if h.hanging(self.now_ms)]

    @property
    def problem(self) -> bool:
        """An open transaction on the output of a job that is not running, or one that hangs while it runs."""
        return bool(self.open_partitions) and (not self.job_running or bool(self.hanging))

    def looked_again(self, ends: Mapping[int, tuple[int, int]]) -> OutputCheck:
        """This check with the partitions' ends read again after the holders were asked: a holder whose partition's
        last stable offset has moved past its transaction's start ended meanwhile (the running job's batch
        committed between two requests) and is left out. A hanging transaction pins the offset and stays."""
        held = tuple(h for h in self.holders or () if ends.get(h.partition, (0, 0))[0] <= h.start_offset)
        return replace(self, ends=ends, holders=None if self.holders is None else held)

    def describe(self) -> str:
        if not self.open_partitions:
            return (f"output topic {self.topic}: no open transaction (the last stable offset is the high watermark "
                    f"on all {len(self.ends)} partitions)")
        behind = ", ".join(f"{p} ({self.ends[p][1] - self.ends[p][0]} offsets)" for p in self.open_partitions)
        held = f"a transaction is open on partition(s) {behind}"
        if not self.problem:
            return f"output topic {self.topic}: {held}, {self._whose_batch()}"
        action = ("abort it with `kafka-transactions.sh abort` (its `find-hanging` lists them): no commit or abort "
                  "is coming" if self.hanging else
                  "start the job (its sink aborts what an earlier driver left open) or wait out the transaction "
                  "timeout")
        return (f"output topic {self.topic}: PROBLEM: {held}{'' if self.job_running else ' while the job is not running'}"
                f"; read_committed consumers wait there until it ends: {action}{self._holders_text()}")

    def _whose_batch(self) -> str:
        if self.holders is None:
            return f"as while the running job writes its batch (who holds it is unknown: {self.unanswered})" \
                if self.unanswered else "as while the running job writes its batch"
        if all(self.is_job_writer(h) for h in self.holders):
            return "the running job's batch" + self._holders_text()
        return "the running job's batch and another producer's" + self._holders_text()

    def _holders_text(self) -> str:
        if self.holders is None:
            if self.unanswered:
                return f"; who holds it could not be asked ({self.unanswered})"
            return (f"; `kafka-transactions.sh describe --transactional-id {self.transactional_id}` says whether it "
                    "is the job's writer" if self.transactional_id else "")
        parts = []
        for h in self.holders:
            whose = "the job's writer" if self.is_job_writer(h) else "another producer"
            age = h.open_for_ms(self.now_ms)
            since = f", {h.state} for {age / 1000:.0f} s of its {h.timeout_ms / 1000:.0f} s timeout" \
                if age is not None and h.timeout_ms is not None else \
                ", unknown to any transaction coordinator" if h.state is None else f", {h.state}"
            parts.append(f"partition {h.partition} from offset {h.start_offset}: {whose}, {h.name()}{since}"
                         f"{' - HANGING' if h.hanging(self.now_ms) else ''}")
        return "; held by " + "; ".join(parts) if parts else "; no producer holds it any more (it just ended)"

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "transactional_id": self.transactional_id, "job_running": self.job_running,
                "open_partitions": self.open_partitions,
                "partitions": {str(p): {"last_stable_offset": s, "high_watermark": h}
                               for p, (s, h) in sorted(self.ends.items())},
                "holders": None if self.holders is None else
                [h.to_dict(self.now_ms, self.is_job_writer(h)) for h in self.holders],
                **({"holders_unanswered": self.unanswered} if self.unanswered else {}),
                "problem": self.problem}
