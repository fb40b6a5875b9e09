"""The health gate's look and the job's lag: is a started job consuming, and how far behind is it.

An upgrade's new version must run, commit batches and not fall behind (``core.health`` judges a series of
lag samples); the watchdog needs the lag to tell a stuck job from an idle one. Both read the same thing:
the high watermarks of the partitions the job reports offsets for, against those offsets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.checkpoint.reader import read_started_position
from airflow_kafka_stream.core.health import (
    HealthSpec,
    LagSample,
    judge_health,
    judge_started,
    run_position,
    total_lag,
)
from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.job_watch import summary
from airflow_kafka_stream.core.offsets import TopicPartition, to_nested
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.kafka.metadata import watermarks
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)


def partition_highs(kafka_config: Mapping[str, Any], last_offsets: Mapping[str, Mapping[str, int]]
                    ) -> dict[tuple[str, int], int]:
    """High watermarks of the partitions the job reports offsets for."""
    partitions = [TopicPartition(t, int(p)) for t, parts in last_offsets.items() for p in parts]
    found = watermarks(dict(kafka_config), partitions) if partitions else {}
    return {(tp.topic, tp.partition): high for tp, (_low, high) in found.items()}


def job_lag(kafka_config: Mapping[str, Any] | None, status: Mapping[str, Any] | StatusDocument | None) -> int | None:
    """Total lag of the job behind its partitions' high watermarks; None when it cannot be known."""
    document = StatusDocument.of(status)
    offsets = document.last_offsets if document else None
    if not kafka_config or not offsets:
        return None
    try:
        return total_lag(offsets, partition_highs(kafka_config, offsets))
    except StreamError as exc:
        log.warning("cannot read the watermarks for the lag: %s", exc)
        return None


def started_at(home: JobHome, document: StatusDocument) -> Any:
    """Where the run ``document`` describes started, for one that has committed no batch yet: its checkpoint's
    last committed offsets (a restart resumes there), else the start offsets of its generation (a fresh one,
    such as a drop-state generation seeded at a savepoint's offsets); None when neither is known."""
    if document.checkpoint:
        position = read_started_position(document.checkpoint, home.storage_options)
        committed = position.committed_kafka_offsets() if position is not None else None
        if committed:
            return to_nested(committed)
    if document.generation is None:
        return None
    return home.generation_start_offsets(document.generation)


class HealthLook:
    """The health gate's look: each call reads the status and, while this run is RUNNING with a fresh
    heartbeat, takes a lag sample; the samples are kept across looks (the gate judges their trend).

    Watermark errors end the look with an error event (the gate cannot judge a job it cannot see).
    """

    def __init__(self, home: JobHome, kafka_config: Mapping[str, Any], spec: HealthSpec, timeout: float) -> None:
        self.home, self.kafka_config, self.spec = home, kafka_config, spec
        self.samples: list[LagSample] = []
        #: The driver's time lag (max seconds, None when it measured none) at each sample: the seconds beside ``lag``.
        self.time_lags: list[float | None] = []
        self.deadline = time.monotonic() + timeout

    def __call__(self) -> dict[str, Any]:
        document, now = self.home.status_document(), datetime.now(UTC)
        if document and document.state is JobState.RUNNING and judge_started(document, self.spec, now):
            # Before this run's first batch its lag counts from where it started: lag 0 must prove no input.
            offsets = run_position(document.last_offsets, None if document.last_offsets
                                   else started_at(self.home, document))
            lag = None if offsets is None else total_lag(offsets, partition_highs(self.kafka_config, offsets))
            self.samples.append(LagSample(now, lag, document.batches_this_run or 0))
            self.time_lags.append(document.time_lag.max_seconds if document.time_lag is not None else None)
        verdict = judge_health(document, self.samples, self.spec, now, time.monotonic() >= self.deadline)
        return {"status": verdict.outcome, "message": verdict.message, "job": summary(document, now),
                "lag": [sample.lag for sample in self.samples], "time_lag_seconds": list(self.time_lags),
                "time_lag": document.time_lag.to_dict() if document and document.time_lag is not None else None}
