"""Verify a job: group offsets against checkpoint offsets and topic watermarks, per partition."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from airflow_kafka_stream.core.batch_marker import transactional_id
from airflow_kafka_stream.core.durations import parse_duration
from airflow_kafka_stream.core.lag_window import Clock, Look, bound, evaluate_window, resets_of
from airflow_kafka_stream.core.output_check import OutputCheck
from airflow_kafka_stream.core.sink import KAFKA
from airflow_kafka_stream.core.verify import Status, VerifyResult
from airflow_kafka_stream.errors import KafkaAccessError
from airflow_kafka_stream.kafka.control_inputs import verify_job
from airflow_kafka_stream.kafka.transaction_holders import transaction_holders
from airflow_kafka_stream.kafka.transactions import stable_and_high
from airflow_kafka_stream.ops.context import JobContext
from airflow_kafka_stream.ops.guard import job_is_running
from airflow_kafka_stream.ops.inspect import position, unstarted
from airflow_kafka_stream.ops.time_lag import with_time_lag

#: Looks at a running job before its group findings stand, and the pause between them.
SNAPSHOT_ATTEMPTS = 3
SNAPSHOT_RETRY_SECONDS = 0.5
#: Findings that a group commit on its way causes for a moment.
GROUP_LAGS = frozenset({Status.GROUP_BEHIND, Status.MISSING_IN_GROUP})
#: The window Burrow's rules judge the group's recent looks over (core.lag_window), by default.
DEFAULT_WINDOW = "PT10M"

log = logging.getLogger(__name__)


def verify(ctx: JobContext, stall_threshold: str | timedelta = "PT10M", now: datetime | None = None,
           window: str | timedelta = DEFAULT_WINDOW, record: bool = True) -> VerifyResult:
    """Observe checkpoint, group and watermarks, evaluate the per-partition rules, then Burrow's window rules
    (REWIND, STOP, WARN: core.lag_window) over the job home's recent looks and this one.

    With ``record`` this look joins the job home's window (``control/lag-window.json``, bounded); without
    it (the job page, which writes nothing) the window is judged with this look but not kept. A bare
    checkpoint (no job home) or a job without a group has no window.
    """
    now = now or datetime.now(UTC)
    span = parse_duration(window, "window") if isinstance(window, str) else window
    result = with_time_lag(ctx.kafka_config, _verify_partitions(ctx, stall_threshold, now), now)
    result = replace(result, output=_output_check(ctx, now))
    if ctx.home is None or not result.group:
        return result
    return replace(result, window=_judge_window(ctx, result, span, now, record))


def _output_check(ctx: JobContext, now: datetime) -> OutputCheck | None:
    """The transactional Kafka sink's output topic (job.json's sink of kind kafka): is a transaction open on it?"""
    sink = ctx.sink
    if sink is None or sink.kind != KAFKA or not sink.path or ctx.home is None:
        return None
    topic = sink.path.rstrip("/").rsplit("/", 1)[-1]
    config = ctx.require_kafka()
    check = OutputCheck(topic, stable_and_high(config, topic), job_is_running(ctx.home, now)[0],
                        transactional_id(ctx.name, topic))
    if not check.open_partitions:
        return check
    try:  # a held partition: whose transaction holds it (the job's writer, another producer, one that hangs)?
        holders, asked_ms = transaction_holders(config, topic, check.open_partitions)
    except KafkaAccessError as exc:  # the finding stands on the offsets; the answer says why it names no holder
        log.warning("verify of %s: %s", ctx.name, exc)
        return replace(check, unanswered=str(exc))
    check = replace(check, holders=tuple(holders), now_ms=asked_ms)
    # A transaction that ended between the requests looks hanging (its coordinator no longer has it open): only
    # one that still holds its partition's last stable offset on a second look is.
    return check.looked_again(stable_and_high(config, topic)) if check.hanging else check


def _judge_window(ctx: JobContext, result: VerifyResult, span: timedelta, now: datetime, record: bool):
    home = ctx.home
    assert home is not None
    document = home.status_document()
    look = Look(now, {v.partition: (v.observation.group_offset, v.observation.high) for v in result.partitions},
                live=bool(document and document.is_live))
    looks = bound([*(found for found in map(Look.parse, home.lag_window()) if found is not None), look], now, span)
    if record:
        try:
            home.write_lag_window([kept.to_dict() for kept in looks])
        except OSError as exc:  # a job home this user may only read: judge the window, keep nothing
            log.warning("cannot keep this look in the window of %s: %s", home.url, exc)
    return evaluate_window(looks, Clock(now, span, resets_of(home.history())))


def _verify_partitions(ctx: JobContext, stall_threshold: str | timedelta, now: datetime) -> VerifyResult:
    """Observe checkpoint, group and watermarks, then evaluate the rules.

    STALLED is judged only while the job's heartbeat says it runs: a stopped job
    with lag is expected, a running one that commits no batch is not. A running
    job's checkpoint is read again after its group (core/verify.py says why),
    and the job is looked at again, up to SNAPSHOT_ATTEMPTS times, while its
    group looks behind or missing: the last look is reported as it is.
    """
    stall_after = (parse_duration(stall_threshold, "stall_threshold") if isinstance(stall_threshold, str)
                   else stall_threshold)
    seeded = unstarted(ctx)
    if seeded is not None:
        # No query ran on this generation yet: the job will resume at its seeded offsets.
        result = verify_job(ctx.require_kafka(), ctx.require_group(), seeded.offsets(),
                            ctx.topics_with(seeded.offsets()), now=now, stall_after=stall_after)
        return replace(result, note=f"{seeded.describe()}; the CHECKPOINT column shows those start offsets")
    running = ctx.home is not None and job_is_running(ctx.home, now)[0]
    for attempt in range(1, SNAPSHOT_ATTEMPTS + 1):
        pos = position(ctx)
        # Every Kafka source of a query that unions several readers; refused when two share a partition.
        checkpoint_offsets = pos.kafka_offsets("verification")
        last_batch_at = datetime.fromtimestamp(pos.timestamp_ms / 1000, UTC) if running and pos.timestamp_ms else None
        later = (lambda: position(ctx).kafka_offsets("verification")) if running else None
        result = verify_job(ctx.require_kafka(), ctx.require_group(), checkpoint_offsets,
                            ctx.topics_with(checkpoint_offsets), now=now, last_batch_at=last_batch_at,
                            stall_after=stall_after, checkpoint_later=later)
        # A group commit still on its way after its batch committed shows the group behind (or, for the first
        # batch, missing) for a moment: a running job is looked at again before that finding stands.
        if not running or attempt == SNAPSHOT_ATTEMPTS or not any(v.status in GROUP_LAGS for v in result.partitions):
            return result
        time.sleep(SNAPSHOT_RETRY_SECONDS)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns on its last attempt
