"""Reset a job's offsets: checkpoint and consumer group together, never while the job runs.

observe → decide → act: the plan is computed from the checkpoint's position,
the group's offsets and the topic watermarks (a dry run stops there); execute
re-plans under the job lock, checks every precondition before changing
anything, appends a batch to the checkpoint (or starts a new checkpoint
generation when state is dropped), then moves the group, then verifies both.
The checkpoint is the truth the job resumes from, so it moves first; if the
group cannot follow, the error says how to align it (an executed to-current reset).

:func:`run` is what the CLI and the reset operator call: a dry run (the plan,
optionally exported as CSV) or an execution, by :class:`ResetMode`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from airflow_kafka_stream.checkpoint.reader import CheckpointPosition
from airflow_kafka_stream.checkpoint.savepoints import validate_savepoint
from airflow_kafka_stream.checkpoint.writer import append_batch, recover_incomplete_append
from airflow_kafka_stream.core.asset_windows import rewind_note
from airflow_kafka_stream.core.checkpoint_log import HDFS_PROVIDER
from airflow_kafka_stream.core.offsets import PartitionOffsets, to_nested
from airflow_kafka_stream.core.reset_plan import ResetPlan
from airflow_kafka_stream.core.reset_scope import parse_scope
from airflow_kafka_stream.core.reset_strategy import ResetStrategy, StrategyKind, parse_strategy, strategy_kind
from airflow_kafka_stream.errors import (
    InvalidInputError,
    JobStateError,
    OperationIncompleteError,
    Refusals,
    StreamError,
)
from airflow_kafka_stream.kafka.control_inputs import plan_job_reset
from airflow_kafka_stream.kafka.groups import alter_group_offsets
from airflow_kafka_stream.kafka.metadata import committed_offsets
from airflow_kafka_stream.ops.context import JobContext
from airflow_kafka_stream.ops.guard import ensure_not_running
from airflow_kafka_stream.ops.inspect import position
from airflow_kafka_stream.ops.results import GroupMove, ResetOutcome, ResetRun
from airflow_kafka_stream.ops.sink_guard import ensure_sink_accepts, ensure_sink_log_present, sink_note
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage.files import url_to_fs
from airflow_kafka_stream.storage.operation import recorded_operation

log = logging.getLogger(__name__)

class ResetMode(StrEnum):
    """What a reset does: plan only (the default everywhere), or apply the plan."""

    DRY_RUN = "dry-run"
    EXECUTE = "execute"


@dataclass(frozen=True)
class ResetRequest:
    """What the user asked for, before anything is looked up.

    ``strategy`` is a :class:`StrategyKind` or its name; ``value`` the strategy's value as text: an offset or
    ``topic:partition=offset,...``, a date-time, a signed shift, a duration, a CSV file's path or a savepoint id.
    """

    strategy: StrategyKind | str
    value: str | None = None
    scope: list[str] = field(default_factory=list)
    timezone: str | None = None
    strict: bool = False


def build_strategy(ctx: JobContext, request: ResetRequest, now: datetime) -> ResetStrategy:
    """Turn the request into a strategy, reading a CSV file or a savepoint manifest where asked."""
    kind = strategy_kind(request.strategy)
    if kind is StrategyKind.TO_SAVEPOINT:
        if ctx.home is None:
            raise InvalidInputError("the to-savepoint strategy needs the job home (savepoints live there), "
                                    "not a bare checkpoint", setting="job_home")
        manifest = validate_savepoint(ctx.home.savepoint_url(request.value or ""), ctx.storage_options)
        recorded = manifest.kafka_sources().require_one_position_per_partition("a reset to it").union()
        return ResetStrategy.to_recorded(recorded, label=f"savepoint {manifest.savepoint_id}")
    value = request.value
    if kind is StrategyKind.FROM_FILE:
        if not value:
            raise InvalidInputError("the from-file strategy needs a CSV file (topic,partition,offset) as its value, "
                                    "e.g. one written by a dry run's export", setting="value")
        text = _read_text(value)
        if not text.strip():
            raise InvalidInputError(f"reset file {value} is empty; it needs topic,partition,offset lines",
                                    setting="value")
        return ResetStrategy.from_file(text, source=value)
    if kind is StrategyKind.TO_OFFSET and value and "=" in value:
        value = _offset_assignments_json(value)
    return parse_strategy(kind, value, now=now, timezone=request.timezone)


def _read_text(path: str) -> str:
    try:
        fs, p = url_to_fs(path)
        return fs.cat_file(p).decode("utf-8")
    except FileNotFoundError as exc:
        raise InvalidInputError(f"reset file {path} does not exist; pass the CSV a dry run exported",
                                setting="value") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"reset file {path} is not UTF-8 text; pass a CSV topic,partition,offset",
                                setting="value") from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot read reset file {path}: {exc}; pass a readable CSV file",
                                setting="value") from exc


def _offset_assignments_json(text: str) -> str:
    """`t:0=5,t:1=7` → `{"t":{"0":5,"1":7}}` (validated later by the strategy parser)."""
    nested: dict[str, dict[str, Any]] = {}
    for item in text.split(","):
        left, _, offset = item.strip().partition("=")
        topic, _, part = left.rpartition(":")
        if not topic or not part.strip().isdigit() or not offset.strip().lstrip("-").isdigit():
            raise InvalidInputError(
                f"to-offset item {item.strip()!r} is not TOPIC:PARTITION=OFFSET; e.g. orders:0=42,orders:1=40",
                setting="value",
            )
        nested.setdefault(topic, {})[part.strip()] = int(offset)
    return json.dumps(nested)


def plan(ctx: JobContext, request: ResetRequest, now: datetime | None = None,
         pos: CheckpointPosition | None = None) -> ResetPlan:
    """The reset plan (observes only; changes nothing)."""
    now = now or datetime.now(UTC)
    strategy = build_strategy(ctx, request, now)
    scope = parse_scope(request.scope or None)
    pos = pos or position(ctx, "an offset reset")
    # The plan covers every Kafka source's partitions; execute splits the targets back by source.
    checkpoint_offsets = pos.kafka_offsets("an offset reset")
    topics = ctx.topics_with(checkpoint_offsets)
    return plan_job_reset(ctx.require_kafka(), ctx.group, checkpoint_offsets, topics, strategy, scope,
                          strict=request.strict)


def _preflight(ctx: JobContext, pos: CheckpointPosition, drop_state: bool, allow_sink_batch_log: bool) -> None:
    """Every reason to refuse, checked before anything changes and named together (the job was found stopped)."""
    found = Refusals("the reset")
    if pos.in_flight_batch_id is not None:
        found.add(JobStateError(
            f"{pos.url}: batch {pos.in_flight_batch_id} is in flight (planned, not committed); the job is running "
            "or was killed mid-batch. Start it and stop it gracefully, then reset"
        ))
    if drop_state:
        found.reasons += _drop_state_refusals(ctx, pos, allow_sink_batch_log)
        found.raise_any()
        return
    found.check(ensure_sink_log_present, ctx.sink, ctx.storage_options)
    if pos.stateful and pos.state_store_provider != HDFS_PROVIDER:
        found.add(_state_not_carried(pos, _drop_state_refusals(ctx, pos, allow_sink_batch_log)))
    found.raise_any()


def _drop_state_refusals(ctx: JobContext, pos: CheckpointPosition, allow_sink_batch_log: bool) -> list[StreamError]:
    """Why a reset with drop_state would be refused (none: it may start a new generation)."""
    found = Refusals("a reset with drop_state")
    if ctx.home is None:
        found.add(InvalidInputError("drop_state starts a new checkpoint generation, which lives in the job home: "
                                    "give the job home, not a bare checkpoint", setting="job_home"))
    found.check(refuse_seeding_several_sources, pos.kafka_sources().indexes, f"checkpoint {pos.url}")
    found.check(ensure_sink_accepts, ctx.sink, 0, allow_sink_batch_log, ctx.storage_options)
    return found.reasons


def _state_not_carried(pos: CheckpointPosition, with_drop_state: list[StreamError]) -> JobStateError:
    """State a reset cannot carry to an appended batch: the way out is drop_state, and what that would meet too."""
    text = (f"{pos.url} is stateful with state store {pos.state_store_provider or 'unknown'}: its state cannot be "
            "carried to a new batch safely. Reset with drop_state to start a new checkpoint generation at the "
            "targets (operator state is dropped)")
    if with_drop_state:
        text += "; with drop_state it would then be refused for this too: " + " ".join(
            f"({n}) {reason}" for n, reason in enumerate(with_drop_state, 1))
    return JobStateError(text, setting=["drop_state", *(name for r in with_drop_state for name in r.settings)])


def refuse_seeding_several_sources(kafka_indexes: list[int], what: str) -> None:
    """A new generation is seeded with one startingOffsets map, which fits a query with one Kafka reader only."""
    if len(kafka_indexes) > 1:
        raise InvalidInputError(
            f"{what} has {len(kafka_indexes)} Kafka sources (source lines {', '.join(map(str, kafka_indexes))}): "
            "a new checkpoint generation starts every reader from one startingOffsets map, and each reader "
            "refuses the other readers' topics, so dropping state cannot seed such a query. Keep the state instead "
            "(a reset without drop_state appends a batch holding each source's targets), or start the new "
            "query from its own per-reader startingOffsets", setting="drop_state"
        )


def current_generation_context(ctx: JobContext) -> JobContext:
    """The context re-pointed at the generation that is current now (call it under the job lock).

    The context was resolved before the lock was taken; a restore or a drop-state
    reset that finished in between made another generation current, and the job
    starts from the current one, so that is the one to change. A checkpoint
    outside the job home's generations was named explicitly and is kept.
    """
    if ctx.home is None:
        return ctx
    generations = ctx.home.url_of(*layout.CHECKPOINTS).rstrip("/") + "/"
    if not ctx.checkpoint_url.startswith(generations):
        return ctx
    current = ctx.home.checkpoint_url()
    if current != ctx.checkpoint_url:
        log.warning("checkpoint generation changed to %s (was %s) before the job lock was taken; resetting %s",
                    current, ctx.checkpoint_url, current)
    return replace(ctx, checkpoint_url=current)


def execute(ctx: JobContext, request: ResetRequest, drop_state: bool = False, allow_sink_batch_log: bool = False,
            export: str | None = None, now: datetime | None = None,
            by: str | None = None) -> ResetOutcome:
    """Apply a reset to checkpoint and group; returns what was done, including the verification.

    Refusals come before the first durable change (the append or the new
    generation); after it, every failure is an OperationIncompleteError that
    says what changed and how to finish.
    """
    if ctx.home is None:
        raise InvalidInputError("executing a reset needs the job home (it holds the lock and the running status), "
                                "not a bare checkpoint", setting="job_home")
    args = {"strategy": str(request.strategy), "value": request.value, "scope": request.scope, "strict": request.strict,
            "drop_state": drop_state, "sink": ctx.sink.to_json() if ctx.sink else None}
    with recorded_operation(ctx.home, "reset", args, by=by) as record:
        ensure_not_running(ctx.home, ctx.kafka_config, ctx.group, operation="an offset reset")
        ctx = current_generation_context(ctx)
        if recover_incomplete_append(ctx.checkpoint_url, ctx.storage_options):
            log.warning("finished or undid an earlier reset of %s that was interrupted", ctx.checkpoint_url)
        pos = position(ctx, "an offset reset")
        the_plan = plan(ctx, request, now, pos)
        sources = pos.kafka_sources()
        record["before"] = {"checkpoint": ctx.checkpoint_url, "batch_id": pos.batch_id,
                            "offsets": to_nested(sources.union()), "sources": _by_source(sources.by_index)}
        _preflight(ctx, pos, drop_state, allow_sink_batch_log)
        targets = the_plan.checkpoint_offsets()
        if not targets:
            raise InvalidInputError("the plan has no partitions to reset; check the scope (topics) and the job's "
                                    "topics", setting="scope")
        by_source = sources.split(targets)  # refuses a target that belongs to no single source
        if export:
            export_csv(the_plan, export)
        outcome = ResetOutcome(plan=the_plan, targets=to_nested(targets), sources=_by_source(by_source),
                               sink=sink_note(ctx.sink) + rewind_note(ctx.home.announced_assets()),
                               checkpoint=ctx.checkpoint_url)
        if drop_state:
            gen, url = ctx.home.new_generation("reset-drop-state", start_offsets=to_nested(targets))
            outcome = replace(outcome, generation=gen, checkpoint=url)
            changed = (f"checkpoint generation {gen} ({url}) was created and made current, seeded with the targets "
                       f"(generation {ctx.checkpoint_url} is kept as it was)")
        else:
            appended = append_batch(ctx.checkpoint_url, sources=by_source, sink_metadata_path=ctx.sink_path,
                                    storage_options=ctx.storage_options)
            outcome = replace(outcome, batch_id=appended.batch_id)
            changed = (f"batch {appended.batch_id} was appended to checkpoint {ctx.checkpoint_url}, so the job "
                       "resumes at the targets")
        record["after"] = outcome.to_dict()
        # The group moves only where the scope says, as kafka-consumer-groups.sh would move it.
        changes = the_plan.changes()
        try:
            outcome = replace(outcome, group=_move_group(ctx, changes, changed))
            verified, problems = _verify(ctx, by_source, changes, outcome)
            outcome = replace(outcome, verified=verified, verification=problems)
        except OperationIncompleteError:
            raise
        except Exception as exc:  # noqa: BLE001 - after a durable change nothing may read as "nothing changed"
            raise OperationIncompleteError(
                f"the reset is incomplete: {changed}; then checking the result failed: {exc}. Compare checkpoint "
                "and group with a verify, and if they differ align the group with an executed reset to-current "
                "(strategy to-current, the checkpoint's position)"
            ) from exc
        record["after"] = outcome.to_dict()
        if not outcome.verified:
            record.update(result="failed", error="verification failed: " + "; ".join(outcome.verification))
        return outcome


def _by_source(offsets: Mapping[int, PartitionOffsets]) -> dict[str, dict[str, dict[str, int]]]:
    return {str(index): to_nested(line) for index, line in sorted(offsets.items())}


def _move_group(ctx: JobContext, targets: PartitionOffsets, changed: str) -> GroupMove:
    if not ctx.group:
        return GroupMove(False, reason="no consumer group known for this job")
    if not targets:
        return GroupMove(False, reason="no partition in scope changes")
    try:
        alter_group_offsets(ctx.require_kafka(), ctx.group, targets)
    except StreamError as exc:
        raise OperationIncompleteError(
            f"the reset is incomplete: {changed}, but consumer group {ctx.group!r} could not follow: {exc}. "
            "Align the group once it is free with an executed reset to-current (strategy to-current, the "
            "checkpoint's position)"
        ) from exc
    return GroupMove(True, group=ctx.group)


def _verify(ctx: JobContext, by_source: Mapping[int, PartitionOffsets], changes: PartitionOffsets,
            outcome: ResetOutcome) -> tuple[bool, list[str]]:
    """Re-read checkpoint and group: every source line holds its targets, the group every change."""
    problems: list[str] = []
    if outcome.generation is not None:
        home = ctx.home
        assert home is not None
        info = home.generation_info(outcome.generation) or {}
        if home.current_generation() != outcome.generation:
            problems.append(f"generation {outcome.generation} is not the current one")
        if info.get("start_offsets") != outcome.targets:
            problems.append(f"generation {outcome.generation} starts at {info.get('start_offsets')}")
    else:
        now_at = position(ctx).kafka_sources().by_index
        for index, targets in sorted(by_source.items()):
            line = now_at.get(index, {})
            problems += [f"checkpoint source {index} {tp}: {line.get(tp)} != {off}" for tp, off in targets.items()
                         if line.get(tp) != off]
            problems += [f"checkpoint source {index} {tp}: unexpected {off}" for tp, off in line.items()
                         if tp not in targets]
    if ctx.group and changes:
        group = committed_offsets(ctx.require_kafka(), ctx.group, list(changes))
        problems += [f"group {tp}: {group.get(tp)} != {off}" for tp, off in changes.items() if group.get(tp) != off]
    return not problems, problems


def export_csv(the_plan: ResetPlan, path: str) -> None:
    fs, p = url_to_fs(path)
    try:
        with fs.open(p, "w") as out:
            out.write(the_plan.to_csv())
    except OSError as exc:
        raise InvalidInputError(f"cannot write the plan to {path}: {exc}; export to a writable file path",
                                setting="export") from exc


def run(ctx: JobContext, request: ResetRequest, mode: ResetMode = ResetMode.DRY_RUN, *, export: str | None = None,
        drop_state: bool = False, allow_sink_batch_log: bool = False, now: datetime | None = None,
        by: str | None = None) -> ResetRun:
    """A reset as the CLI and the reset operator ask for it.

    A dry run plans (and writes the plan as CSV to ``export`` when given) and changes
    nothing; an execution applies the plan (see :func:`execute`; ``export`` is written
    under the job lock, from the plan it applies).
    """
    if ResetMode(mode) is ResetMode.DRY_RUN:
        the_plan = plan(ctx, request, now)
        if export:
            export_csv(the_plan, export)
        return ResetRun(the_plan)
    outcome = execute(ctx, request, drop_state=drop_state, allow_sink_batch_log=allow_sink_batch_log, export=export,
                      now=now, by=by)
    return ResetRun(outcome.plan, outcome)
