"""The driver's ``status.json``, parsed in one place into a typed, immutable document.

The driver's runtime writes the document whole every few seconds (see
``storage/status.py``); every reader gets the same typed view from
:meth:`StatusDocument.parse`. Parsing never fails: a key that is absent or of
the wrong type reads as None (or its empty value), exactly as the rules that
read the raw mapping treat it (``core.liveness``: a boolean is no heartbeat
time, a negative clock skew is none declared). :meth:`StatusDocument.to_dict`
gives back the raw mapping as read, for XCom, logs and history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.job_state import FINAL_STATES, LIVE_STATES, JobState


def _number(value: Any) -> float | None:
    """A JSON number (never a boolean) as a float."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(value: Any) -> int | None:
    """A JSON whole number (never a boolean)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _time(value: Any) -> datetime | None:
    """An ISO-8601 time as the runtime writes it (``datetime.isoformat``), None when not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _samples(value: Any) -> tuple[Any, ...]:
    """[epoch, value] pairs of numbers; anything else is left out."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(list(sample) for sample in value if isinstance(sample, list | tuple) and len(sample) >= 2
                 and _number(sample[0]) is not None and _number(sample[1]) is not None)


def _mapping(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class GroupCommits:
    """The group committer's counters (``group_commits``): offsets committed to the consumer group."""

    successes: int = 0
    failures: int = 0
    replaced_while_pending: int = 0
    consecutive_failures: int = 0
    last_error: str | None = None
    last_error_at: str | None = None
    committed_batch: int | None = None
    committed_offsets: dict[str, Any] | None = None
    committed_at: str | None = None
    pending_batch: int | None = None

    @classmethod
    def parse(cls, raw: Any) -> GroupCommits | None:
        if not isinstance(raw, Mapping):
            return None
        return cls(
            successes=_whole(raw.get("successes")) or 0,
            failures=_whole(raw.get("failures")) or 0,
            replaced_while_pending=_whole(raw.get("replaced_while_pending")) or 0,
            consecutive_failures=_whole(raw.get("consecutive_failures")) or 0,
            last_error=_text(raw.get("last_error")),
            last_error_at=_text(raw.get("last_error_at")),
            committed_batch=_whole(raw.get("committed_batch")),
            committed_offsets=_mapping(raw.get("committed_offsets")),
            committed_at=_text(raw.get("committed_at")),
            pending_batch=_whole(raw.get("pending_batch")),
        )


@dataclass(frozen=True)
class TimeLag:
    """The job's lag in seconds (``time_lag``), as the driver last measured it.

    ``partitions`` is ``{topic: {partition: seconds}}``: how old the oldest record the job has not processed
    yet is (0 when the partition is caught up). ``last_batch_delay_seconds`` is the newest batch's commit time
    minus the newest record's timestamp it held (None before a batch with records).
    """

    measured_at: datetime | None
    partitions: dict[str, dict[str, float]]
    max_seconds: float
    last_batch_delay_seconds: float | None = None

    @classmethod
    def parse(cls, raw: Any) -> TimeLag | None:
        """None when absent or malformed (no partitions mapping, or no number for ``max_seconds``)."""
        if not isinstance(raw, Mapping) or not isinstance(raw.get("partitions"), Mapping):
            return None
        most = _number(raw.get("max_seconds"))
        if most is None:
            return None
        partitions = {str(topic): {str(part): float(seconds) for part, seconds in parts.items()
                                   if _number(seconds) is not None}
                      for topic, parts in raw["partitions"].items() if isinstance(parts, Mapping)}
        return cls(measured_at=_time(raw.get("measured_at")), partitions=partitions, max_seconds=most,
                   last_batch_delay_seconds=_number(raw.get("last_batch_delay_seconds")))

    def to_dict(self) -> dict[str, Any]:
        """As the status writes it (``measured_at`` an ISO time)."""
        return {"measured_at": self.measured_at.isoformat() if self.measured_at else None,
                "partitions": {topic: dict(parts) for topic, parts in self.partitions.items()},
                "max_seconds": self.max_seconds, "last_batch_delay_seconds": self.last_batch_delay_seconds}

    def worst(self) -> list[tuple[str, int, float]]:
        """(topic, partition, seconds), the most behind first (then by topic and partition)."""
        rows = [(topic, int(part), seconds) for topic, parts in self.partitions.items()
                for part, seconds in parts.items() if part.lstrip("-").isdigit()]
        return sorted(rows, key=lambda row: (-row[2], row[0], row[1]))


@dataclass(frozen=True)
class MetricsExport:
    """The driver's metrics export (``metrics``): its exporters, whether it fails, the scrape port."""

    exporters: tuple[str, ...] = ()
    failing: bool = False
    last_error: str | None = None
    prometheus_port: int | None = None

    @classmethod
    def parse(cls, raw: Any) -> MetricsExport | None:
        """None when absent (metrics off) or not a mapping."""
        if not isinstance(raw, Mapping):
            return None
        exporters = raw.get("exporters")
        return cls(exporters=tuple(e for e in exporters if isinstance(e, str)) if isinstance(exporters, list) else (),
                   failing=raw.get("failing") is True, last_error=_text(raw.get("last_error")),
                   prometheus_port=_whole(raw.get("prometheus_port")))


@dataclass(frozen=True)
class StatusDocument:
    """What the driver last wrote about itself; see the runtime's ``status()`` for each key."""

    #: The state the document names; None when absent or not one of :class:`JobState` (``state_text`` has it).
    state: JobState | None
    #: The ``state`` value as written (an unknown state is still shown by messages).
    state_text: Any = None
    job: str | None = None
    app_version: str | None = None
    application_id: str | None = None
    query_id: str | None = None
    run_id: str | None = None
    generation: int | None = None
    checkpoint: str | None = None
    group: str | None = None
    #: The last committed batch (``last_batch_id``, or ``batch_id`` as older runtimes wrote it).
    last_batch_id: int | None = None
    last_offsets: dict[str, Any] | None = None
    batches_this_run: int | None = None
    records_this_run: int | None = None
    dead_letters: int | None = None
    read_placement: dict[str, Any] | None = None
    lag_samples: tuple[Any, ...] = ()
    heartbeat: datetime | None = None
    heartbeat_epoch: float | None = None
    heartbeat_interval_seconds: float | None = None
    clock_skew_seconds: float | None = None
    pid: int | None = None
    jvm_pid: int | None = None
    host: str | None = None
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    stop_requested_at: str | None = None
    stop_requested_by: str | None = None
    drain_overdue: bool = False
    note: str | None = None
    error: str | None = None
    group_commits: GroupCommits | None = None
    #: The metrics export (None when metrics are off).
    metrics: MetricsExport | None = None
    #: The lag in seconds per partition and of the last batch (None when absent or malformed).
    time_lag: TimeLag | None = None
    #: [epoch, max seconds] of the recent time lag measurements: the job page's seconds plot.
    time_lag_samples: tuple[Any, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> StatusDocument | None:
        """The typed document of a status as read; None for no status (absent, empty or not a mapping)."""
        if not raw or not isinstance(raw, Mapping):
            return None
        batch = raw.get("last_batch_id")
        if batch is None:
            batch = raw.get("batch_id")
        samples = raw.get("lag_samples")
        return cls(
            state=JobState.parse(raw.get("state")),
            state_text=raw.get("state"),
            job=_text(raw.get("job")),
            app_version=None if raw.get("app_version") is None else str(raw.get("app_version")),
            application_id=_text(raw.get("application_id")),
            query_id=_text(raw.get("query_id")),
            run_id=_text(raw.get("run_id")),
            generation=_whole(raw.get("generation")),
            checkpoint=_text(raw.get("checkpoint")),
            group=_text(raw.get("group")),
            last_batch_id=_whole(batch),
            last_offsets=_mapping(raw.get("last_offsets")),
            batches_this_run=_whole(raw.get("batches_this_run")),
            records_this_run=_whole(raw.get("records_this_run")),
            dead_letters=_whole(raw.get("dead_letters")),
            read_placement=_mapping(raw.get("read_placement")),
            lag_samples=tuple(samples) if isinstance(samples, list | tuple) else (),
            heartbeat=_time(raw.get("heartbeat")),
            heartbeat_epoch=_number(raw.get("heartbeat_epoch")),
            heartbeat_interval_seconds=_number(raw.get("heartbeat_interval_seconds")),
            clock_skew_seconds=_number(raw.get("clock_skew_seconds")),
            pid=_whole(raw.get("pid")),
            jvm_pid=_whole(raw.get("jvm_pid")),
            host=_text(raw.get("host")),
            started_at=_time(raw.get("started_at")),
            stopped_at=_time(raw.get("stopped_at")),
            stop_requested_at=_text(raw.get("stop_requested_at")),
            stop_requested_by=_text(raw.get("stop_requested_by")),
            drain_overdue=raw.get("drain_overdue") is True,
            note=_text(raw.get("note")),
            error=_text(raw.get("error")),
            group_commits=GroupCommits.parse(raw.get("group_commits")),
            metrics=MetricsExport.parse(raw.get("metrics")),
            time_lag=TimeLag.parse(raw.get("time_lag")),
            time_lag_samples=_samples(raw.get("time_lag_samples")),
            raw=dict(raw),
        )

    @classmethod
    def of(cls, status: Mapping[str, Any] | StatusDocument | None) -> StatusDocument | None:
        """The typed document of a status given either way (raw as read, or already parsed)."""
        return status if isinstance(status, StatusDocument) else cls.parse(status)

    @property
    def started_text(self) -> str | None:
        """``started_at`` as written (a time that did not parse is shown as it is)."""
        value = self.raw.get("started_at")
        return None if value is None else str(value)

    @property
    def heartbeat_text(self) -> str | None:
        """``heartbeat`` as written, for messages (:attr:`heartbeat` is the parsed time)."""
        value = self.raw.get("heartbeat")
        return None if value is None else str(value)

    def to_dict(self) -> dict[str, Any]:
        """The raw document as read (a copy)."""
        return dict(self.raw)

    # -- what readers ask of it ----------------------------------------------------------------
    @property
    def is_live(self) -> bool:
        """The driver reported a live state (whether it truly runs is ``core.liveness``'s rule)."""
        return self.state in LIVE_STATES

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    def heartbeat_age(self, now: datetime | float) -> float | None:
        """Seconds since the heartbeat (``heartbeat_epoch``), None without a usable one."""
        if self.heartbeat_epoch is None:
            return None
        return (now.timestamp() if isinstance(now, datetime) else float(now)) - self.heartbeat_epoch


def written_state(status: Mapping[str, Any] | StatusDocument | None) -> Any:
    """The state a status names as written (an unknown one too), None without a status: for messages and the
    ``before`` of history records, which show what the driver wrote."""
    document = StatusDocument.of(status)
    return None if document is None else document.state_text
