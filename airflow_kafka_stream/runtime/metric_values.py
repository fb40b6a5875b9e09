"""What a driver exports as metrics, as plain values: the points.

The pure half of :mod:`airflow_kafka_stream.runtime.metrics`, beside its settings
(:mod:`airflow_kafka_stream.core.metrics_settings`). :func:`metric_points` turns what the
runtime knows (its status document, the last batch, the heartbeat and the last savepoint) into the value and
attributes of every metric in :data:`METRICS`. Nothing here starts a thread or does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.metrics_settings import JOB_LABEL, PREFIX
from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, records_behind

#: The job's state as a number (``state`` metric): 0 stopped, 1 starting, 2 running, 3 draining, 4 failed.
STATE_NUMBER: dict[JobState, int] = {JobState.STOPPED: 0, JobState.STARTING: 1, JobState.RUNNING: 2,
                                     JobState.DRAINING: 3, JobState.FAILED: 4}


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str  # "gauge" or "counter" (monotonic, cumulative over this run)
    unit: str
    description: str


def _spec(name: str, kind: str, unit: str, description: str) -> MetricSpec:
    return MetricSpec(f"{PREFIX}.{name}", kind, unit, description)


#: Every metric a driver exports (docs/metrics.md describes each).
METRICS: tuple[MetricSpec, ...] = (
    _spec("up", "gauge", "1", "1 while the driver runs the job (starting, running, draining), 0 once it ended"),
    _spec("state", "gauge", "1", "the job's state: 0 stopped, 1 starting, 2 running, 3 draining, 4 failed"),
    _spec("lag.records", "gauge", "{record}",
          "records in the partition after the last committed batch, up to the high watermark it was planned against"),
    _spec("lag.seconds", "gauge", "s",
          "age of the oldest record of the partition not processed yet (0 when caught up)"),
    _spec("batch.delay", "gauge", "s", "end-to-end delay of the last batch: its commit time minus its newest record's"),
    _spec("batch.rows_per_second", "gauge", "{record}/s", "records the last batch processed per second of its run"),
    _spec("batch.duration", "gauge", "s", "how long the last batch took, planning to commit"),
    _spec("batch.last_committed", "gauge", "1", "id of the last batch committed to the checkpoint"),
    _spec("group_commits", "counter", "{commit}",
          "offset commits to the consumer group in this run, by outcome (succeeded, failed)"),
    _spec("dead_letters", "counter", "{record}", "records sent to the dead-letter destination in this run"),
    _spec("skipped_offsets", "counter", "{offset}",
          "offsets failOnDataLoss=false skipped in this run because Kafka no longer had them"),
    _spec("heartbeat.age", "gauge", "s", "seconds since the driver last wrote its status (heartbeat)"),
    _spec("savepoint.age", "gauge", "s", "seconds since the job's newest savepoint was taken (absent: none)"),
    _spec("hot_standby.ready", "gauge", "1", "1 while the job's hot standby is READY to take it over, else 0"),
    _spec("sink.transactions", "counter", "{transaction}",
          "transactions of the transactional Kafka sink in this run, by outcome (committed, aborted, fenced)"),
    _spec("sink.transaction.duration", "gauge", "s", "how long the Kafka sink's last committed transaction took"),
)
METRIC_NAMES = tuple(spec.name for spec in METRICS)

Point = tuple[float, dict[str, Any]]


# -- the points ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchFigures:
    """What the metrics keep of the last batch's progress."""

    batch_id: int
    duration_seconds: float | None
    rows_per_second: float | None
    lag_records: dict[TopicPartition, int] | None


def partition_lag(latest: PartitionOffsets | None, end: PartitionOffsets | None) -> dict[TopicPartition, int] | None:
    """Records after each partition's batch end up to the watermark the batch was planned against (never < 0)."""
    if not latest or not end:
        return None
    return {tp: records_behind(high, end[tp]) for tp, high in latest.items() if tp in end}


def batch_figures(batch_id: int, rows: int, duration_ms: Mapping[str, int], latest: PartitionOffsets | None,
                  end: PartitionOffsets | None) -> BatchFigures:
    """A batch's figures from its progress (``triggerExecution`` is the whole batch, as Spark times it)."""
    total = duration_ms.get("triggerExecution")
    seconds = total / 1000.0 if isinstance(total, int | float) and total >= 0 else None
    rate = rows / seconds if seconds else None
    return BatchFigures(batch_id, seconds, rate, partition_lag(latest, end))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def metric_points(status: Mapping[str, Any], job: Mapping[str, Any], batch: BatchFigures | None,
                  heartbeat_age: float | None, savepoint_epoch: float | None, now: float,
                  hot_standby_ready: bool | None = None) -> dict[str, list[Point]]:
    """Every metric's points from the runtime's status document (``status()``) and its extra figures.

    ``job`` holds the attributes every point carries (job name, application version); partition metrics
    add ``topic`` and ``partition``. A metric without a value now has no point.
    """
    def name(short: str) -> str:
        return f"{PREFIX}.{short}"

    def one(value: float | None) -> list[Point]:
        return [] if value is None else [(value, dict(job))]

    state = JobState.parse(status.get("state"))
    points: dict[str, list[Point]] = {spec.name: [] for spec in METRICS}
    points[name("up")] = one(1.0 if state is not None and state.is_live else 0.0)
    points[name("state")] = one(float(STATE_NUMBER[state]) if state is not None else None)
    if batch is not None and batch.lag_records is not None:
        points[name("lag.records")] = [(float(n), {**job, "topic": tp[0], "partition": tp[1]})
                                       for tp, n in sorted(batch.lag_records.items())]
    time_lag = status.get("time_lag") if isinstance(status.get("time_lag"), Mapping) else {}
    partitions = time_lag.get("partitions") if isinstance(time_lag.get("partitions"), Mapping) else {}
    for topic, by_partition in sorted(partitions.items()):
        for partition, seconds in sorted((by_partition if isinstance(by_partition, Mapping) else {}).items()):
            if _number(seconds) is not None and str(partition).lstrip("-").isdigit():
                points[name("lag.seconds")].append((float(seconds), {**job, "topic": str(topic),
                                                                     "partition": int(partition)}))
    points[name("batch.delay")] = one(_number(time_lag.get("last_batch_delay_seconds")))
    if batch is not None:
        points[name("batch.rows_per_second")] = one(batch.rows_per_second)
        points[name("batch.duration")] = one(batch.duration_seconds)
    points[name("batch.last_committed")] = one(_number(status.get("last_batch_id")))
    commits = status.get("group_commits") if isinstance(status.get("group_commits"), Mapping) else {}
    points[name("group_commits")] = [(float(_number(commits.get(key)) or 0), {**job, "outcome": outcome})
                                     for key, outcome in (("successes", "succeeded"), ("failures", "failed"))]
    points[name("dead_letters")] = one(_number(status.get("dead_letters")) or 0.0)
    skipped = status.get("skipped_offsets") if isinstance(status.get("skipped_offsets"), Mapping) else {}
    points[name("skipped_offsets")] = one(_number(skipped.get("offsets")) or 0.0)
    points[name("heartbeat.age")] = one(None if heartbeat_age is None else max(heartbeat_age, 0.0))
    points[name("savepoint.age")] = one(None if savepoint_epoch is None else max(now - savepoint_epoch, 0.0))
    points[name("hot_standby.ready")] = one(None if hot_standby_ready is None else float(hot_standby_ready))
    sink = status.get("kafka_sink") if isinstance(status.get("kafka_sink"), Mapping) else None
    if sink is not None:  # a job writing through the transactional Kafka sink
        counts = sink.get("transactions") if isinstance(sink.get("transactions"), Mapping) else {}
        points[name("sink.transactions")] = [(float(_number(counts.get(outcome)) or 0), {**job, "outcome": outcome})
                                             for outcome in ("committed", "aborted", "fenced")]
        points[name("sink.transaction.duration")] = one(_number(sink.get("last_transaction_seconds")))
    return points


def job_attributes(job_name: str, app_version: str | None) -> dict[str, str]:
    """The attributes every point carries: the job's name and, when it has one, its application version."""
    return {JOB_LABEL: job_name, **({"app_version": str(app_version)} if app_version else {})}
