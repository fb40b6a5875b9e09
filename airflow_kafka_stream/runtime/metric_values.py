"""What a driver exports as metrics, as plain values: the settings read from the environment and the points.

The pure half of :mod:`airflow_kafka_stream.runtime.metrics`. :func:`read_settings` reads OpenTelemetry's
own environment variables (and the Prometheus port setting) into :class:`MetricsSettings`, or None when
nothing asks for metrics, refusing a malformed value with the variable named. :func:`metric_points` turns
what the runtime knows (its status document, the last batch, the heartbeat and the last savepoint) into
the value and attributes of every metric in :data:`METRICS`. Nothing here starts a thread or does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition
from airflow_kafka_stream.core.redaction import is_secret_key
from airflow_kafka_stream.errors import InvalidInputError

PREFIX = "airflow_kafka_stream"
#: The driver's Prometheus scrape port (0: any free port, shown in the status); same as StreamConfig.prometheus_port.
PROMETHEUS_PORT_ENV = "AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT"

OTLP, PROMETHEUS, CONSOLE, NONE = "otlp", "prometheus", "console", "none"
PROTOCOLS = ("http/protobuf", "grpc")
#: Attribute keys left out besides the secret-looking settings of core.redaction.
SECRET_ATTRIBUTE_MARKERS = ("api_key", "apikey", "api-key", "authorization", "passwd", "private")

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
    _spec("heartbeat.age", "gauge", "s", "seconds since the driver last wrote its status (heartbeat)"),
    _spec("savepoint.age", "gauge", "s", "seconds since the job's newest savepoint was taken (absent: none)"),
)
METRIC_NAMES = tuple(spec.name for spec in METRICS)

Point = tuple[float, dict[str, Any]]


@dataclass(frozen=True)
class MetricsSettings:
    """Which exporters run and how, as read from the environment (never holds a header or a secret)."""

    exporters: tuple[str, ...]
    protocol: str = "http/protobuf"
    endpoint: str | None = None
    #: Where the OTLP exporter sends (the signal's URL: ``/v1/metrics`` added to a base endpoint for HTTP).
    export_endpoint: str | None = None
    #: How long one OTLP export may take, retries included (``OTEL_EXPORTER_OTLP_TIMEOUT``, seconds as the SDK reads it).
    otlp_timeout_seconds: float = 10.0
    interval_seconds: float = 60.0
    timeout_seconds: float = 30.0
    prometheus_host: str = "0.0.0.0"  # noqa: S104 - a scrape endpoint is scraped from elsewhere; see docs/metrics.md
    prometheus_port: int | None = None
    resource_attributes: dict[str, str] = field(default_factory=dict)
    service_name: str = "airflow-kafka-stream"


def _positive_millis(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of milliseconds (OpenTelemetry's unit for intervals), as seconds."""
    return _positive(env, name, default * 1000.0, "milliseconds", "60000") / 1000.0


def _positive_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    return _positive(env, name, default, "seconds", "10")


def _positive(env: Mapping[str, str], name: str, default: float, unit: str, example: str) -> float:
    """The variable's positive number, ``default`` when it is unset; refused naming it otherwise."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InvalidInputError(f"{name}={text!r} is not a positive number of {unit}; unset it or give e.g. "
                                f"{name}={example}")
    return value


def _port(text: str, name: str) -> int:
    try:
        port = int(text.strip())
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise InvalidInputError(f"{name}={text!r} is not a port: give a whole number from 1 to 65535 (0: any free "
                                "port)")
    return port


def _endpoint(env: Mapping[str, str], name: str) -> str | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    parts = urlsplit(text)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"{name} must be an http:// or https:// URL of an OTLP receiver, e.g. "
                                f"http://collector:4318; got a value that is not one")
    return text


def resource_attributes(text: str, name: str = "OTEL_RESOURCE_ATTRIBUTES") -> dict[str, str]:
    """``key=value,key=value`` as OpenTelemetry writes it; secret-looking keys are left out (no secret in any
    attribute), a part without ``=`` or without a key is refused."""
    attributes: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"{name}: {part.split('=')[0][:40]!r} is not key=value; give e.g. "
                                    f"{name}=deployment.environment=prod,team=data")
        lowered = key.strip().lower()
        if not is_secret_key(lowered) and not any(marker in lowered for marker in SECRET_ATTRIBUTE_MARKERS):
            attributes[key.strip()] = value.strip()
    return attributes


def read_settings(env: Mapping[str, str], prometheus_port: int | None = None) -> MetricsSettings | None:
    """The metrics settings in ``env`` (OpenTelemetry's variables), None when nothing asks for metrics.

    OTLP runs when ``OTEL_METRICS_EXPORTER`` names ``otlp`` or, unset, when an OTLP endpoint is given; the
    Prometheus endpoint when it names ``prometheus`` or a port is set (``prometheus_port`` or
    :data:`PROMETHEUS_PORT_ENV`). ``none`` or ``OTEL_SDK_DISABLED=true`` turns everything off.
    """
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    signal_endpoint = _endpoint(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    endpoint = signal_endpoint or _endpoint(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    port_text = env.get(PROMETHEUS_PORT_ENV, "").strip()
    if prometheus_port is not None:
        port: int | None = _port(str(prometheus_port), "prometheus_port")
    elif port_text:
        port = _port(port_text, PROMETHEUS_PORT_ENV)
    else:
        port = None
    named = env.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if named:
        exporters = tuple(dict.fromkeys(e.strip() for e in named.split(",") if e.strip()))
        unknown = [e for e in exporters if e not in (OTLP, PROMETHEUS, CONSOLE, NONE)]
        if unknown:
            raise InvalidInputError(f"OTEL_METRICS_EXPORTER names {', '.join(unknown)}; this driver exports to "
                                    "otlp, prometheus, console or none")
        if NONE in exporters:
            return None
        if port is not None and PROMETHEUS not in exporters:
            exporters += (PROMETHEUS,)
    else:
        exporters = ((OTLP,) if endpoint else ()) + ((PROMETHEUS,) if port is not None else ())
    if not exporters:
        return None
    protocol_name = ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL" if env.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "").strip()
                     else "OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = env.get(protocol_name, "").strip() or "http/protobuf"
    if protocol not in PROTOCOLS:
        raise InvalidInputError(f"{protocol_name}={protocol!r}: give http/protobuf or grpc")
    timeout_name = ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT" if env.get("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "").strip()
                    else "OTEL_EXPORTER_OTLP_TIMEOUT")
    export_endpoint = endpoint
    if endpoint and not signal_endpoint and protocol == "http/protobuf":
        export_endpoint = endpoint.rstrip("/") + "/v1/metrics"
    if PROMETHEUS in exporters and port is None:
        port = _port(env.get("OTEL_EXPORTER_PROMETHEUS_PORT", "").strip() or "9464", "OTEL_EXPORTER_PROMETHEUS_PORT")
    return MetricsSettings(
        exporters=exporters,
        protocol=protocol,
        endpoint=endpoint,
        export_endpoint=export_endpoint,
        otlp_timeout_seconds=_positive_seconds(env, timeout_name, 10.0),
        interval_seconds=_positive_millis(env, "OTEL_METRIC_EXPORT_INTERVAL", 60.0),
        timeout_seconds=_positive_millis(env, "OTEL_METRIC_EXPORT_TIMEOUT", 30.0),
        prometheus_host=env.get("OTEL_EXPORTER_PROMETHEUS_HOST", "").strip() or "0.0.0.0",  # noqa: S104
        prometheus_port=port if PROMETHEUS in exporters else None,
        resource_attributes=resource_attributes(env.get("OTEL_RESOURCE_ATTRIBUTES", "")),
        service_name=env.get("OTEL_SERVICE_NAME", "").strip() or "airflow-kafka-stream",
    )


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
    return {tp: max(high - end[tp], 0) for tp, high in latest.items() if tp in end}


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
                  heartbeat_age: float | None, savepoint_epoch: float | None, now: float) -> dict[str, list[Point]]:
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
    points[name("heartbeat.age")] = one(None if heartbeat_age is None else max(heartbeat_age, 0.0))
    points[name("savepoint.age")] = one(None if savepoint_epoch is None else max(now - savepoint_epoch, 0.0))
    return points


def job_attributes(job_name: str, app_version: str | None) -> dict[str, str]:
    """The attributes every point carries: the job's name and, when it has one, its application version."""
    return {"job": job_name, **({"app_version": str(app_version)} if app_version else {})}
