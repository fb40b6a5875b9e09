"""A standby's full rehearsal: the new version's own query on a private copy of the running job's state.

Before an upgrade asks the old version to stop, the standby runs the query the new version built (the
user's DataFrame, its transformations and stateful operators) on a scratch checkpoint under
``<home>/rehearsals/<token>/``: a live copy of the job's checkpoint at its second newest committed batch
plus the newest batch's offsets, so Spark re-runs the job's last batch from the state before it (real
records, however idle the topic) and loads the real state into the new operators, checking its schema.
Then at most :data:`MAX_BATCHES` more batches of newer records, each at most :data:`BATCH_RECORDS`
records. The sink is replaced by Spark's ``noop`` sink, or by the job's own rehearsal sink (a writer
pointed at a scratch folder, ``run(..., rehearsal_sink=...)``), and the source gets its own stop
handshake and start record. Nothing of the job is written: its checkpoint, group (only the runtime
commits to it), status, lock and output stay untouched; the scratch area is removed afterwards.

A state failure (see ``core.rehearsal``) is rehearsed again without state, from the same offsets, to
tell ``needs drop_state`` from ``fails``. A failure on a record is narrowed to the record's partition
and offset by re-running stateless rehearsals on halves of the stretch (at most :data:`MAX_LOCATE_RUNS`).

Each run is bounded: this project's source by its binding file (``source/binding.py``); Spark's connector, which
keeps the options its DataFrame was defined with, by the checkpoint (``checkpoint/rehearsal_copy.py``: the copy's
re-run batch stretched over up to ``MAX_BATCHES * BATCH_RECORDS`` newer records, a seeded one for each stateless
run), each run then being that one batch (``Trigger.Once``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.rehearsal_copy import (
    RehearsalCopy,
    bound_pending_batch,
    copy_for_rehearsal,
    seed_checkpoint,
)
from airflow_kafka_stream.checkpoint.state_info import read_state
from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, render_offsets_json
from airflow_kafka_stream.core.rehearsal import (
    FailureKind,
    RehearsalResult,
    Verdict,
    failure_kind,
    grouping_names,
    python_error,
    spark_error_line,
    state_failure_reason,
    stretch_end,
)
from airflow_kafka_stream.core.spark_kafka_options import librdkafka_settings
from airflow_kafka_stream.core.state_metadata import state_differences
from airflow_kafka_stream.kafka.metadata import watermarks
from airflow_kafka_stream.moved import moved_attributes
from airflow_kafka_stream.runtime.rehearsal_sink import sink_refusal, writer_facts
from airflow_kafka_stream.runtime.session import EXECUTOR_GRACE_SECONDS, ExecutorGrace
from airflow_kafka_stream.source.binding import write_binding
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)

#: Newer batches a rehearsal runs after re-running the job's last one, and the records each may read.
MAX_BATCHES = 3
BATCH_RECORDS = 1000
#: Stateless re-runs a failed rehearsal may spend finding the record its new code fails on.
MAX_LOCATE_RUNS = 14
#: Seconds a single locating run may take.
LOCATE_RUN_SECONDS = 60.0

#: Builds the rehearsal's writer from the query's DataFrame and a scratch folder (fsspec URL) for its output.
RehearsalSink = Callable[[Any, str], Any]


@dataclass(frozen=True)
class RehearsalSetup:
    """Where and how one rehearsal runs."""

    home: JobHome
    token: str
    checkpoint_url: str  # the job's current checkpoint (read only)
    binding_file: str | None  # the query's bindingPath; None: its source is bounded through the checkpoint
    options: Mapping[str, str]  # the job's source options (its own start offsets, drain path...)
    drop_state: bool = False
    timeout_seconds: float = 300.0
    sink: RehearsalSink | None = None
    spark_url: Callable[[str], str] = str  # names a job-home URL for Spark's Hadoop file systems
    output_mode: str | None = None  # the job's writer's, when known

    @property
    def seeded(self) -> bool:
        """Whether runs are bounded through their checkpoints (no binding file: Spark's connector)."""
        return self.binding_file is None


def rehearse(spark, writer, setup: RehearsalSetup) -> RehearsalResult:
    """Run the rehearsal of the module docstring on ``writer``'s query (a classic DataStreamWriter); the verdict,
    never an exception for the query's failures."""
    started = time.monotonic()
    facts = writer_facts(writer)
    refused = sink_refusal(spark, facts.get("source"))
    if refused is not None:
        return RehearsalResult(Verdict.FAILS, refused, seconds=time.monotonic() - started,
                               details={"failure": str(FailureKind.SINK)})
    df = writer._df
    if facts.get("output_mode"):
        setup = replace(setup, output_mode=facts["output_mode"])
    try:
        result = _rehearse(spark, df, setup, setup.home.rehearsal_url(setup.token), started)
    finally:
        setup.home.remove_rehearsal(setup.token)
    return replace(result, seconds=time.monotonic() - started)


def _rehearse(spark, df, setup: RehearsalSetup, scratch: str, started: float) -> RehearsalResult:
    position = read_position(setup.checkpoint_url, setup.home.storage_options)
    if position.batch_id is None:
        return RehearsalResult(Verdict.NOT_REHEARSED, "the job has no committed batch yet: there is no state and "
                               "no record position to rehearse on", with_state=False)
    copy = copy_for_rehearsal(setup.checkpoint_url, f"{scratch}/copy", setup.home.storage_options)
    if setup.seeded:
        copy = bound_pending_batch(copy, _stretch(setup, copy), setup.home.storage_options)
    deadline = started + setup.timeout_seconds
    if not setup.drop_state:
        run = _run(spark, df, setup, scratch, 0, copy, deadline, with_state=True)
        if run.failure is None or run.kind is not FailureKind.STATE:
            return run.result(setup, with_state=True)
        log.warning("rehearsal with the job's state failed (%s); rehearsing from its offsets alone", run.reason)
        stateless = _run(spark, df, setup, scratch, 1, copy, deadline, with_state=False)
        if stateless.failure is None:
            compared = _compare_state(setup, f"{scratch}/checkpoint-1")
            found = compared.get("state_differences") or []
            reason = run.reason + (f" ({'; '.join(found)})" if found else "")
            return RehearsalResult(Verdict.NEEDS_DROP_STATE, reason, batches=stateless.batches,
                                   records=stateless.records, with_state=False, details=compared)
        return stateless.result(setup, with_state=False, state_reason=run.reason)
    return _run(spark, df, setup, scratch, 0, copy, deadline, with_state=False).result(setup, with_state=False)


def _compare_state(setup: RehearsalSetup, new_checkpoint: str) -> dict[str, Any]:
    """The stateful operators of the job's checkpoint and of the new version's (from the checkpoint its stateless
    run wrote), and what differs between them; empty when they cannot be read."""
    try:
        old = read_state(setup.checkpoint_url, setup.home.storage_options)
        new = read_state(new_checkpoint, setup.home.storage_options)
    except Exception as exc:  # noqa: BLE001 - the comparison only adds words to the verdict
        log.warning("could not compare the state of the job and of the new version: %s", exc)
        return {}
    return {"state_differences": state_differences(old.operators, new.operators),
            "state_operators": {"job": [op.to_dict() for op in old.operators],
                                "new_version": [op.to_dict() for op in new.operators]}}


@dataclass
class _Run:
    failure: str | None
    started: bool
    batches: int
    records: int
    timed_out: bool
    reason: str = ""
    kind: FailureKind | None = None
    located: str | None = None
    no_executors: bool = False

    def result(self, setup: RehearsalSetup, with_state: bool, state_reason: str | None = None) -> RehearsalResult:
        if self.no_executors:
            return RehearsalResult(Verdict.NOT_REHEARSED, f"the standby got no executor in {EXECUTOR_GRACE_SECONDS:.0f}s: "
                                   "the running version holds the cluster's cores. Give the cluster room for both "
                                   "applications (e.g. spark.cores.max) to have upgrades rehearsed",
                                   with_state=with_state)
        if self.timed_out:
            return RehearsalResult(Verdict.TIMED_OUT, f"the rehearsal outlived its time limit of "
                                   f"{setup.timeout_seconds:.0f}s after {self.batches} batch(es); it was ended, so "
                                   "nothing is known about the new version", batches=self.batches,
                                   records=self.records, with_state=with_state)
        if self.failure is None:
            return RehearsalResult(Verdict.COMPATIBLE, f"the new version ran {self.batches} batch(es), "
                                   f"{self.records} records" + (" on the job's state" if with_state else
                                                                 " from the job's offsets (without state)"),
                                   batches=self.batches, records=self.records, with_state=with_state)
        reason = self.located or self.reason
        if state_reason:
            reason = f"{state_reason}; without state it fails too: {reason}"
        return RehearsalResult(Verdict.FAILS, reason, batches=self.batches, records=self.records,
                               with_state=with_state, details={"failure": str(self.kind)})


def _run(spark, df, setup: RehearsalSetup, scratch: str, attempt: int, copy: RehearsalCopy, deadline: float,
         with_state: bool) -> _Run:
    """One rehearsal query: on the scratch copy (``with_state``), or on an empty checkpoint starting where the copy's
    re-run batch starts."""
    checkpoint = copy.url if with_state else f"{scratch}/checkpoint-{attempt}"
    if not setup.seeded:
        _bind(setup, scratch, attempt, copy.start, limit=True)
    elif not with_state:
        seed_checkpoint(checkpoint, copy, copy.start, copy.end, setup.home.storage_options)
    try:
        query = _start(df, setup, f"{scratch}/output-{attempt}", setup.spark_url(checkpoint))
    except Exception as exc:  # noqa: BLE001 - the new version's query could not start: its verdict
        text = str(exc)
        kind = failure_kind(text, started=False)
        reason = state_failure_reason(text, _key_names(df)) if kind is FailureKind.STATE else (
            f"the new version's query could not start: {spark_error_line(text)}")
        return _Run(text, False, 0, 0, False, reason, kind)
    waited, failure = _execute(spark, query, deadline, MAX_BATCHES + 1)
    batches, records = _counted(query)
    if waited == NO_EXECUTORS:
        return _Run(None, True, batches, records, False, no_executors=True)
    if failure is None:
        return _Run(None, True, batches, records, waited == TIMED_OUT)
    text = str(failure)
    kind = failure_kind(text, started=True)
    if kind is FailureKind.STATE:
        return _Run(text, True, batches, records, False, state_failure_reason(text, _key_names(df)), kind)
    reason = f"the new version raised {python_error(text)}" if kind is FailureKind.RECORD else (
        f"the new version failed: {spark_error_line(text)}")
    run = _Run(text, True, batches, records, False, reason, kind)
    if kind is FailureKind.RECORD:
        run.located = _locate(spark, df, setup, scratch, copy, deadline, reason)
    return run


def _key_names(df) -> tuple[str, ...]:
    """The query's names of its aggregation's keys, from its analyzed plan (a verdict shows them beside the
    names Spark made up); none when the plan cannot be read (Spark Connect has no JVM plan here)."""
    try:
        return grouping_names(df._jdf.queryExecution().analyzed().toString())
    except Exception as exc:  # noqa: BLE001 - the names only add words to the verdict
        log.info("could not read the query's plan for its key names: %s", exc)
        return ()


def _stretch(setup: RehearsalSetup, copy: RehearsalCopy):
    """The end of a seeded rehearsal's stretch: the copy's re-run batch's end and up to ``MAX_BATCHES *
    BATCH_RECORDS`` newer records, as far as the topic holds them now (the end alone when the broker cannot
    tell)."""
    try:
        high = {tp: found[1] for tp, found in watermarks(librdkafka_settings(setup.options), copy.end).items()}
    except Exception as exc:  # noqa: BLE001 - the rehearsal still runs the job's last batch
        log.warning("the rehearsal reads no newer records: the topic's end offsets could not be read (%s)", exc)
        return copy.end
    return stretch_end(copy.end, high, MAX_BATCHES * BATCH_RECORDS)


def _bind(setup: RehearsalSetup, scratch: str, attempt: int, start: PartitionOffsets, *, limit: bool,
          end: PartitionOffsets | None = None) -> None:
    """The options of the next start of the query (its binding file): the job's source options with the
    attempt's own stop handshake and start record, starting at ``start``; at most :data:`BATCH_RECORDS` a batch
    with ``limit``, no further than ``end`` when given."""
    options = {**setup.options, "drainPath": f"{scratch}/control-{attempt}",
               "startOffsetsPath": f"{scratch}/start-{attempt}.json", "startingOffsets": render_offsets_json(start)}
    options.pop("bindingPath", None)
    if limit:
        options["maxOffsetsPerTrigger"] = str(min(int(options.get("maxOffsetsPerTrigger") or BATCH_RECORDS),
                                                  BATCH_RECORDS))
    else:
        options.pop("maxOffsetsPerTrigger", None)
    if end is not None:
        options["rehearsalEndOffsets"] = render_offsets_json(end)
    write_binding(setup.binding_file, options)


def _execute(spark, query, deadline: float, max_batches: int) -> tuple[str, Exception | None]:
    """Wait for a started rehearsal query (see :func:`_await`), stop it if it still runs; how the wait ended and the
    query's failure, if any."""
    try:
        waited = _await(query, deadline, max_batches, spark)
        failure = query.exception()
    finally:
        if query.isActive:
            query.stop()
    return waited, failure


def _start(df, setup: RehearsalSetup, output: str, checkpoint: str):
    """Start the rehearsal's writer: the job's rehearsal sink or ``noop``; append mode, else update (aggregations)."""
    last: Exception | None = None
    for mode in ([setup.output_mode] if setup.output_mode in ("append", "update", "complete") else
                 ["append", "update"]):
        writer = setup.sink(df, output) if setup.sink is not None else df.writeStream.format("noop")
        try:
            triggered = writer.trigger(once=True) if setup.seeded else writer.trigger(availableNow=True)
            return triggered.outputMode(mode).option("checkpointLocation", checkpoint).start()
        except Exception as exc:  # noqa: BLE001 - an output mode the query does not support
            if "STREAMING_OUTPUT_MODE" not in str(exc) and "output mode" not in str(exc).lower():
                raise
            last = exc
    raise last  # type: ignore[misc]


ENDED, TIMED_OUT, NO_EXECUTORS = "ended", "timed out", "no executors"


def _await(query, deadline: float, max_batches: int, spark) -> str:
    """Wait until the query ended or ran ``max_batches`` batches (ENDED), the deadline came (TIMED_OUT), or a
    cluster gave it no executor within the grace (NO_EXECUTORS)."""
    grace = ExecutorGrace(spark)
    while query.isActive:
        if _counted(query)[0] >= max_batches:
            return ENDED
        if time.monotonic() >= deadline:
            return TIMED_OUT
        if grace.ran_out():
            return NO_EXECUTORS
        try:
            query.awaitTermination(0.2)
        except Exception:  # noqa: BLE001 - a failed query: query.exception() has it
            return ENDED
    return ENDED


def _counted(query) -> tuple[int, int]:
    progress = [p for p in query.recentProgress if "commitOffsets" in (p.get("durationMs") or {})
                or p.get("numInputRows")]
    return len(progress), sum(int(p.get("numInputRows") or 0) for p in progress)


def _locate(spark, df, setup: RehearsalSetup, scratch: str, copy: RehearsalCopy, deadline: float, reason: str) -> str | None:
    """Narrow a failure on a record to its partition and offset, with stateless runs over parts of the stretch
    the failed rehearsal read (its re-run batch's range). None when it cannot be narrowed in time."""
    runs = 0

    def fails(end: PartitionOffsets) -> bool | None:
        nonlocal runs
        if runs >= MAX_LOCATE_RUNS or time.monotonic() >= deadline:
            return None
        runs += 1
        return _run_plain(spark, df, setup, scratch, 100 + runs, copy,
                          min(deadline, time.monotonic() + LOCATE_RUN_SECONDS), end)

    for tp in sorted(copy.end, key=str):
        low, high = copy.start.get(tp, copy.end[tp]), copy.end[tp]
        if high <= low:
            continue
        only = {**copy.start, tp: high}
        verdict = fails(only)
        if verdict is None:
            return None
        if not verdict:
            continue
        while high - low > 1:  # the failing record is in [low, high): find the smallest failing end
            middle = (low + high) // 2
            verdict = fails({**copy.start, tp: middle})
            if verdict is None:
                return f"{reason} on {_name(tp)} at an offset in [{low}, {high})"
            low, high = (low, middle) if verdict else (middle, high)
        return f"{reason} on {_name(tp)} offset {low}"
    return None


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic} partition {tp.partition}"


def _run_plain(spark, df, setup: RehearsalSetup, scratch: str, attempt: int, copy: RehearsalCopy, deadline: float,
               end: PartitionOffsets) -> bool | None:
    """Whether a stateless run from the copy's re-run batch up to ``end`` fails on a record (None: not known)."""
    if setup.seeded:
        seed_checkpoint(f"{scratch}/checkpoint-{attempt}", copy, copy.start, end, setup.home.storage_options)
    else:
        _bind(setup, scratch, attempt, copy.start, limit=False, end=end)
    try:
        query = _start(df, setup, f"{scratch}/output-{attempt}", setup.spark_url(f"{scratch}/checkpoint-{attempt}"))
    except Exception:  # noqa: BLE001 - cannot start at all: not a record's fault
        return None
    waited, failure = _execute(spark, query, deadline, 1_000_000)
    if waited != ENDED:
        return None
    return failure is not None and failure_kind(str(failure), started=True) is FailureKind.RECORD


# Moved with the writer's facts (runtime/rehearsal_sink.py); writer_facts and sink_refusal are imported above.
__getattr__ = moved_attributes(__name__, {"BUILT_IN_SINKS": "airflow_kafka_stream.runtime.rehearsal_sink:BUILT_IN_SINKS"})
