"""Which metrics a driver exports, as read from OpenTelemetry's own environment variables, and their names.

:func:`read_settings` reads the variables (and the Prometheus port setting) into :class:`MetricsSettings`,
or None when nothing asks for metrics, refusing a malformed value with the variable named. The driver reads
them when it starts; a submit reads the environment the driver will get, so a bad value is refused before
anything is launched (``ops/launcher.py``). Pure: no OpenTelemetry import, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from airflow_kafka_stream.core.redaction import is_secret_key
from airflow_kafka_stream.errors import InvalidInputError

PREFIX = "airflow_kafka_stream"
#: The attribute (Prometheus label) naming the job on every point. Not ``job``: Prometheus sets its own ``job``
#: label (the scrape job) on every series it scrapes and would rename ours to ``exported_job``.
JOB_LABEL = "stream_job"
#: The driver's Prometheus scrape port (0: any free port, shown in the status); same as StreamConfig.prometheus_port.
PROMETHEUS_PORT_ENV = "AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT"

OTLP, PROMETHEUS, CONSOLE, NONE = "otlp", "prometheus", "console", "none"
PROTOCOLS = ("http/protobuf", "grpc")
#: Attribute keys left out besides the secret-looking settings of core.redaction.
SECRET_ATTRIBUTE_MARKERS = ("api_key", "apikey", "api-key", "authorization", "passwd", "private")


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
