"""What the operations return: small typed values, each with ``to_dict()`` for JSON and XCom.

The CLI prints them as text and the operators log the same text (``render/``); the
Airflow layer pushes their dicts to XCom; neither reaches into an operation's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_kafka_stream.core.offsets import to_nested
from airflow_kafka_stream.core.reset_plan import ResetPlan
from airflow_kafka_stream.core.savepoint_manifest import Manifest
from airflow_kafka_stream.core.status_document import TimeLag

#: Nested offsets as Spark writes them: {topic: {partition: next offset}}.
Nested = dict[str, dict[str, int]]


@dataclass(frozen=True)
class SavepointInfo:
    """One savepoint as its manifest describes it."""

    id: str
    created_at: str
    batch_id: int
    query_id: str | None
    #: Every Kafka source's partitions together (the group's view); None when two sources share a partition.
    offsets: Nested | None
    #: Each Kafka source line's offsets, by source index.
    sources: dict[str, Nested]
    app_version: str | None
    spark_version: str | None
    stateful: bool
    state_store_provider: str | None
    files: int
    #: Set by validate: every file matched its manifest checksum.
    checksums_match: bool | None = None
    #: Why this savepoint is of an earlier batch than asked (a stop that killed the running batch).
    note: str | None = None
    #: Taken while the job ran (a live savepoint), not after a stop.
    live: bool = False

    @classmethod
    def of(cls, manifest: Manifest) -> SavepointInfo:
        sources = manifest.kafka_sources()
        offsets = to_nested(sources.union()) if sources.by_index and not sources.shared_partitions() else None
        return cls(
            id=manifest.savepoint_id,
            created_at=manifest.created_at.isoformat(),
            batch_id=manifest.batch_id,
            query_id=manifest.query_id,
            offsets=offsets,
            sources={str(index): to_nested(line) for index, line in sorted(sources.by_index.items())},
            app_version=manifest.app_version,
            spark_version=manifest.spark_version,
            stateful=manifest.stateful,
            state_store_provider=manifest.state_store_provider,
            files=len(manifest.files),
            live=manifest.live,
        )

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        for optional in ("checksums_match", "note"):
            if found[optional] is None:
                del found[optional]
        return found

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> SavepointInfo:
        """Back from :meth:`to_dict` (an Airflow task's XCom)."""
        return cls(**{name: value.get(name) for name in cls.__dataclass_fields__ if name in value})


@dataclass(frozen=True)
class RestoreResult:
    """A new checkpoint generation made current from a savepoint."""

    savepoint: SavepointInfo
    generation: int
    checkpoint: str
    drop_state: bool
    sink: str
    #: Records the job reads again: the checkpoint's position before the restore minus the savepoint's, summed over
    #: partitions (an appending sink, the Kafka sink, writes them again); None when no position was known.
    records_read_again: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"savepoint": self.savepoint.to_dict(), "generation": self.generation, "checkpoint": self.checkpoint,
                "drop_state": self.drop_state, "sink": self.sink, "records_read_again": self.records_read_again}


@dataclass(frozen=True)
class PruneResult:
    """Savepoints a retention policy deleted, and those kept because an upgrade may roll back to them."""

    deleted: list[str]
    pinned: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeleteResult:
    deleted: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StopRequested:
    """The first phase of a stop: whether the job was running (and so was asked to drain)."""

    was_running: bool
    state: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StopResult:
    """A job that reached a final state, with the savepoint taken of it if one was asked."""

    job_home: str
    was_running: bool
    killed: bool
    state: str | None
    batch_id: int | None
    offsets: Any
    note: str | None = None
    error: str | None = None
    savepoint: SavepointInfo | None = None
    #: The application version that stopped (what an upgrade rolls back to).
    app_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        found = {key: value for key, value in asdict(self).items() if key != "savepoint"}
        found["savepoint"] = self.savepoint.to_dict() if self.savepoint else None
        return found

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> StopResult:
        """Back from :meth:`to_dict` (the stop task's XCom, which the upgrade's later tasks read)."""
        found = {name: value.get(name) for name in cls.__dataclass_fields__ if name != "savepoint"}
        saved = value.get("savepoint")
        return cls(**found, savepoint=SavepointInfo.from_dict(saved) if saved else None)


@dataclass(frozen=True)
class GroupMove:
    """Whether a reset moved the consumer group, and why not when it did not."""

    moved: bool
    group: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class ResetOutcome:
    """An executed reset: the plan, where the checkpoint now stands, the group, and the re-read that checked both."""

    plan: ResetPlan
    targets: Nested
    #: Targets by Kafka source index (a query that unions several readers has one line each).
    sources: dict[str, Nested]
    sink: str
    checkpoint: str
    #: The batch appended to the checkpoint (state kept), or None for a new generation (state dropped).
    batch_id: int | None = None
    generation: int | None = None
    group: GroupMove = field(default_factory=lambda: GroupMove(False, reason="not reached"))
    verified: bool = False
    verification: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "targets": self.targets, "sources": self.sources, "sink": self.sink,
                "checkpoint": self.checkpoint, "batch_id": self.batch_id, "generation": self.generation,
                "group": self.group.to_dict(), "verified": self.verified, "verification": list(self.verification)}


@dataclass(frozen=True)
class RepairResult:
    """What `checkpoint repair` found and did."""

    checkpoint: str
    #: "completed" or "rolled back" for a reset a crash interrupted, None when there was none.
    interrupted_reset: str | None
    abandoned_generations: list[Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JobStatus:
    """What a job is doing now, from its status heartbeat, job.json and its standby's record."""

    job_home: str
    job: str
    #: The one state every front end shows (``core.liveness.shown_state``): what the driver reported (STARTING,
    #: RUNNING, DRAINING, STOPPED, FAILED) while it lives or after it ended and said so; DEAD when its driver is
    #: gone without saying so; GAVE_UP once recovery gave up on it; NOT_STARTED before any status.
    state: str | None
    #: Whether it runs: an active state, a fresh heartbeat, and a driver not known to be gone.
    running: bool
    #: An active state the job can no longer be in: its heartbeat is stale or its processes are gone.
    driver_lost: bool
    app_version: str | None
    heartbeat_age_seconds: float | None
    generation: int | None
    last_batch_id: int | None
    last_offsets: Nested | None
    group: str | None
    topics: list[str]
    #: The group committer's counters (failures, the last error, the batch last committed to the group).
    group_commits: dict[str, Any] | None
    dead_letters: int | None
    #: Where the running query reads its batches and why (readMode; see spark/read_placement.py).
    read_placement: dict[str, Any] | None
    stop_requested_at: str | None
    error: str | None
    #: A live warm standby of an upgrade in progress (its state, version, pid, host, launch time).
    standby: dict[str, Any] | None
    #: The lag in seconds the driver last measured (status ``time_lag``); None before any measurement.
    time_lag: TimeLag | None = None
    #: The driver's metrics export (status ``metrics``: exporters, failing, last_error, prometheus_port); None: off.
    metrics: dict[str, Any] | None = None
    #: The state the driver last wrote, as it wrote it (None before any status).
    recorded_state: str | None = None
    #: Why ``state`` is what it is (the liveness rule's finding, or recovery's give-up).
    state_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["time_lag"] = self.time_lag.to_dict() if self.time_lag is not None else None
        return found


@dataclass(frozen=True)
class ResetRun:
    """A reset as a front end asked for it: the plan, and the outcome when it was executed (None: a dry run)."""

    plan: ResetPlan
    outcome: ResetOutcome | None = None

    @property
    def executed(self) -> bool:
        return self.outcome is not None

    @property
    def ok(self) -> bool:
        """A dry run, or an executed reset whose re-read found checkpoint and group at the targets."""
        return self.outcome is None or self.outcome.verified

    def to_dict(self) -> dict[str, Any]:
        if self.outcome is None:
            return {"executed": False, "plan": self.plan.to_dict()}
        return {**self.outcome.to_dict(), "executed": True}


@dataclass(frozen=True)
class HistoryEntry:
    """One recorded operation: the fields every record has, and the record as it was written."""

    operation: str | None
    result: str | None
    by: str | None
    started_at: str | None
    error: str | None
    #: Every field of the record (args, before, after, finished_at, seconds...), as the history holds it.
    record: dict[str, Any]

    @classmethod
    def of(cls, record: dict[str, Any]) -> HistoryEntry:
        return cls(operation=record.get("operation"), result=record.get("result"), by=record.get("by"),
                   started_at=record.get("started_at"), error=record.get("error"), record=dict(record))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


@dataclass(frozen=True)
class History:
    """A job's operation history, oldest first."""

    job_home: str
    entries: tuple[HistoryEntry, ...]

    def records(self) -> list[dict[str, Any]]:
        """The records as written (what ``history --json`` prints)."""
        return [entry.to_dict() for entry in self.entries]

    def to_dict(self) -> dict[str, Any]:
        return {"job_home": self.job_home, "operations": self.records()}


@dataclass(frozen=True)
class UnlockResult:
    """The job lock an unlock released (what its holder recorded), or None when the job home was not locked."""

    job_home: str
    released: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"released": self.released}


@dataclass(frozen=True)
class SubmitResult:
    """What a submit did: ``launched`` a driver, found one of this version (``already-running``), or gave a
    standby its go (``handed-over``); and what the wait for it needs (since when, which process)."""

    action: str
    reason: str
    app_version: str
    submitted_at: str
    pid: int | None = None
    driver_log: str | None = None
    host: str | None = None
    application_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> SubmitResult:
        return cls(**{name: value.get(name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class StandbyHandle:
    """A launched standby: what the later steps of the upgrade need (no secret)."""

    token: str
    app_version: str
    pid: int
    host: str
    driver_log: str
    launched_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> StandbyHandle:
        return cls(**{name: value[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class WatchdogResult:
    """What one watchdog run saw and did: its action and why, the lag it measured, and the restart."""

    action: str
    reason: str
    lag: int | None = None
    restarted: SubmitResult | None = None

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["restarted"] = self.restarted.to_dict() if self.restarted else None
        return found


@dataclass(frozen=True)
class UpgradeOutcome:
    """A decided upgrade: the new version healthy, or (raised as an error instead) rolled back or not."""

    upgraded: bool
    version: str
    savepoint: str | None
    health: str | None
    previous_version: str | None = None
    #: What the standby's rehearsal found before the stop (verdict, reason, batches, records), None without one.
    rehearsal: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
