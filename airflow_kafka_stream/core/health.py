"""Is a job healthy after a start: the health gate of an upgrade and the watchdog's "stuck" test, as pure rules.

A job that is "running" but consumes nothing is not healthy. The gate looks at
status reads and lag samples taken by the caller (lag = high watermark minus
the job's committed offsets, summed over its partitions) with the clock passed
in. Rules, checked in order; the first that applies decides:

1. The job failed or its driver died (``core.job_watch``): unhealthy.
2. It has not committed ``min_batches`` batches in this run: wait, and past
   the deadline it is unhealthy (it never got going) unless it ran caught up
   (lag 0) for a whole window: with no input there is no batch to commit.
   A run that has committed nothing yet is measured from where it started
   (``run_position``): lag 0 then proves that nothing arrived since its
   start. Where that start is not known, the lag is not known either (None)
   and never counts as caught up: a drop-state generation whose first batch
   was still running once passed as "no input" while records waited.
3. If records waited at any look and for a whole ``window_seconds`` after it
   no batch was committed, it consumes nothing: unhealthy (whether or not it reached
   ``min_batches``). Before its run's first batch the wait is
   ``startup_seconds`` instead (when longer): a fresh driver's first batch pays
   for the JVM, the Python workers and often a backlog, and is no stall.
4. Once it has, the lag is judged at batch commits, as Burrow judges a
   consumer at its offset commits: the first sample after each newly
   committed batch is the lag that batch left behind. Between commits the
   lag always climbs by the input that arrived meanwhile, so comparing two
   samples at arbitrary moments would call a healthy job with slow batches
   "falling behind". Over at least ``window_seconds`` and at least
   ``TREND_COMMITS`` commits, a lag that rose at every commit and ends above
   ``lag_tolerance`` means the job falls behind: unhealthy. Otherwise
   healthy. A window that has passed with fewer commits waits for more (a
   slow trigger); at the deadline, fewer commits show no trend: healthy.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.job_watch import Verdict, WaitStatus, WatchSpec, judge
from airflow_kafka_stream.core.offsets import records_behind
from airflow_kafka_stream.core.status_document import StatusDocument


@dataclass(frozen=True)
class LagSample:
    """One look at the job: when, its total lag, and how many batches its run had committed.

    ``lag`` is None when it cannot be known (no batch of this run and no known start): never caught up.
    """

    at: datetime
    lag: int | None
    batches: int


@dataclass(frozen=True)
class HealthSpec:
    min_batches: int = 1
    window_seconds: float = 60.0
    lag_tolerance: int = 0
    newer_than: datetime | None = None
    max_heartbeat_age: float = 30.0
    #: How long a run may take to commit its first batch before it counts as consuming nothing (rule 3).
    startup_seconds: float = 300.0

    def __post_init__(self) -> None:
        if isinstance(self.min_batches, bool) or not isinstance(self.min_batches, int) or self.min_batches < 1:
            raise ValueError(f"min_batches must be a whole number >= 1, got {self.min_batches!r}")
        if not self.window_seconds >= 0:
            raise ValueError(f"window_seconds must be >= 0, got {self.window_seconds!r}")
        if isinstance(self.lag_tolerance, bool) or not isinstance(self.lag_tolerance, int) or self.lag_tolerance < 0:
            raise ValueError(f"lag_tolerance must be a whole number >= 0, got {self.lag_tolerance!r}")
        if not self.startup_seconds >= 0:
            raise ValueError(f"startup_seconds must be >= 0, got {self.startup_seconds!r}")

    def watch(self) -> WatchSpec:
        return WatchSpec.of([JobState.RUNNING], self.min_batches, self.newer_than, self.max_heartbeat_age)


def total_lag(last_offsets: Mapping[str, Mapping[str, int]] | None, highs: Mapping[tuple[str, int], int]) -> int:
    """Records behind: each partition's high watermark minus the job's next offset (never negative)."""
    lag = 0
    for topic, parts in (last_offsets or {}).items():
        for part, offset in parts.items():
            high = highs.get((topic, int(part)))
            if high is not None:
                lag += records_behind(high, offset)
    return lag


def run_position(last_offsets: Mapping[str, Mapping[str, Any]] | None, start_offsets: Any
                 ) -> Mapping[str, Mapping[str, Any]] | None:
    """The offsets a run's lag is measured from: its own last commit, else the offsets it started at (a run
    that has committed nothing has read nothing past them); None when neither is known.

    ``start_offsets`` as a generation records them: a rule ("latest") or a special value (-1, -2) says where
    Kafka will start, not where it did, so it is no position.
    """
    if last_offsets:
        return last_offsets
    if not isinstance(start_offsets, Mapping) or not start_offsets:
        return None
    for parts in start_offsets.values():
        if not isinstance(parts, Mapping) or not parts:
            return None
        for offset in parts.values():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                return None
    return start_offsets


def judge_health(status: StatusDocument | None, samples: Sequence[LagSample], spec: HealthSpec, now: datetime,
                 deadline_passed: bool) -> Verdict:
    """Healthy (SUCCESS), unhealthy (FAILED) or not known yet (WAITING).

    ``samples`` are taken while the job is RUNNING, before and after it reaches ``min_batches``.
    """
    started = judge(status, spec.watch(), now)
    if started.outcome is WaitStatus.FAILED:  # 1
        return started
    stalled = _consumes_nothing(samples, spec)
    if stalled is not None:  # 3, before the batches are even there
        return stalled
    if started.outcome is WaitStatus.WAITING:  # 2
        idle = _idle(samples, spec)
        if idle is not None:
            return idle
        if deadline_passed:
            return Verdict(WaitStatus.FAILED, f"not healthy in time: {started.message} (needs RUNNING with "
                                           f"{spec.min_batches} batch(es) committed)")
        return started
    gated = [sample for sample in samples if sample.batches >= spec.min_batches]
    if not gated:
        return Verdict(WaitStatus.WAITING, "running; watching the lag")
    first, last = gated[0], gated[-1]
    if (last.at - first.at).total_seconds() < spec.window_seconds:
        if deadline_passed:
            return Verdict(WaitStatus.FAILED, f"the lag window of {spec.window_seconds:.0f}s did not complete in time")
        return Verdict(WaitStatus.WAITING, f"running; lag {last.lag} (was {first.lag}), watching "
                                        f"{spec.window_seconds:.0f}s")
    settled = _consumes_nothing(gated, spec) or _idle(gated, spec)
    if settled is not None:
        return settled
    commits = at_commits(gated)
    if len(commits) < TREND_COMMITS and not deadline_passed:
        return Verdict(WaitStatus.WAITING, f"running; {len(commits)} batch commit(s) seen in the window, waiting for "
                                        f"{TREND_COMMITS} to judge the lag's trend")
    lags = [sample.lag for sample in commits if sample.lag is not None]
    rising = all(after > before for before, after in itertools.pairwise(lags))
    if len(lags) >= TREND_COMMITS and rising and lags[-1] > spec.lag_tolerance:
        return Verdict(WaitStatus.FAILED, f"lag grew at every one of {len(lags)} batch commits, from {lags[0]} to "
                                       f"{lags[-1]} over {(commits[-1].at - commits[0].at).total_seconds():.0f}s: "
                                       "the job falls behind its input")
    return Verdict(WaitStatus.SUCCESS, f"healthy: RUNNING, {last.batches} batch(es) this run, lag at its batch "
                                    f"commits {' -> '.join(str(lag) for lag in lags[-TREND_COMMITS:])}")


#: Batch commits the lag's trend is judged over (two steps: one rise is what one slow batch does).
TREND_COMMITS = 3


def at_commits(samples: Sequence[LagSample]) -> list[LagSample]:
    """The first sample after each newly committed batch: the lag a batch left, without the input since."""
    found: list[LagSample] = []
    for sample in samples:
        if not found or sample.batches > found[-1].batches:
            found.append(sample)
    return found


def _idle(samples: Sequence[LagSample], spec: HealthSpec) -> Verdict | None:
    """Running and caught up for the last whole window with nothing to read: no batch can prove more.

    The samples before that window may have had lag (the input stopped after the job read it): a job that
    caught up and stayed caught up is healthy however its window began.
    """
    caught_up = list(itertools.takewhile(lambda sample: sample.lag == 0, reversed(samples)))
    if caught_up and (caught_up[0].at - caught_up[-1].at).total_seconds() >= max(spec.window_seconds, 1.0):
        return Verdict(WaitStatus.SUCCESS, f"healthy: RUNNING and caught up (lag 0) for "
                                        f"{spec.window_seconds:.0f}s; no input arrived to commit batches on")
    return None


def _consumes_nothing(samples: Sequence[LagSample], spec: HealthSpec) -> Verdict | None:
    """Records waited at some look, and for a whole window (before the run's first batch: ``startup_seconds``)
    after it not one batch was committed.

    Any look with records waiting may start that wait, not only the first: a new version that took over a
    drained job is often first seen at lag 0, before the next record arrives, and a stall found only from the
    first look was then found only at the gate's deadline (a stalled upgrade waited out its 180 s timeout, not
    its 30 s start-up grace).
    """
    if not samples:
        return None
    last = samples[-1]
    for waiting in samples:
        wait = spec.window_seconds if waiting.batches > 0 else max(spec.window_seconds, spec.startup_seconds)
        waited = (last.at - waiting.at).total_seconds()
        if waited < max(wait, 1.0):
            continue  # later looks have waited less; one with more batches may still have a shorter wait
        if waiting.lag is not None and waiting.lag > 0 and last.batches <= waiting.batches:
            return Verdict(WaitStatus.FAILED, f"the job is RUNNING but committed no batch in {waited:.0f}s while "
                                           f"{waiting.lag} record(s) wait: it consumes nothing")
    return None


def judge_started(status: StatusDocument | None, spec: HealthSpec, now: datetime) -> bool:
    """Whether ``status`` is this run's and the job is RUNNING with a fresh heartbeat: a lag sample counts."""
    verdict = judge(status, WatchSpec.of([JobState.RUNNING], 0, spec.newer_than, spec.max_heartbeat_age), now)
    return verdict.outcome is WaitStatus.SUCCESS
