"""The driver's metrics through OpenTelemetry: OTLP push and a Prometheus scrape endpoint.

Configured only by OpenTelemetry's own environment variables and the Prometheus port setting (see
:func:`~airflow_kafka_stream.core.metrics_settings.read_settings`); with nothing configured no exporter,
reader or thread is made. The instruments are observable: the SDK's reader calls them back once per export
interval (or per scrape) and they read the runtime's status document, so nothing runs per batch but a few
assignments.

An export runs in the SDK's own background thread (``PeriodicExportingMetricReader``), bounded by
``OTEL_EXPORTER_OTLP_TIMEOUT``; what it cannot send is dropped (observable instruments hold only the
current values, so memory stays bounded). A failed export is logged once per interval and shown in the
status (``metrics.failing``); the job never waits for it. A figure that cannot be read (a callback that
raises, the savepoint listing failing) is left out of the export, logged once at warning and shown the same
way until it reads again. :class:`RuntimeMetrics` is a component of
:class:`~airflow_kafka_stream.runtime.StreamRuntime`, built when settings were found.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.checkpoint.savepoints import list_savepoints
from airflow_kafka_stream.core.metrics_settings import CONSOLE, OTLP, PROMETHEUS, MetricsSettings, read_settings
from airflow_kafka_stream.core.redaction import without_userinfo
from airflow_kafka_stream.core.standby import StandbyState, is_hot, is_live
from airflow_kafka_stream.runtime.metric_values import (
    METRICS,
    BatchFigures,
    Point,
    batch_figures,
    job_attributes,
    metric_points,
    partition_lag,
)
from airflow_kafka_stream.runtime.run_state import RunState

# Lazy imports: the OpenTelemetry SDK, its exporters and prometheus_client (about 60 ms) are imported only when
# metrics are configured, and only the exporter the settings name.

log = logging.getLogger(__name__)

#: How long the end of a run waits for the last export (the job's exit never waits longer; half a second
#: when the exports already fail).
CLOSE_TIMEOUT_SECONDS = 3.0
#: The newest savepoint is looked up once per export interval, but never more often than this (a listing of
#: the job home's savepoints and a read of each manifest).
SAVEPOINT_LOOKUP_SECONDS = 10.0
#: The SDK exporters' own loggers: their messages about a failed export become ours, once per interval.
EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.metric_exporter",
                    "opentelemetry.exporter.otlp.proto.grpc.exporter",
                    "opentelemetry.exporter.otlp.proto.grpc.metric_exporter")


class ExportHealth(logging.Filter):
    """Whether the last export succeeded; the SDK exporter's messages are kept (not logged) as its error."""

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where
        self.failing = False
        self.last_error: str | None = None
        self._message: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and self._message is None:  # the first says why (refused...)
            self._message = without_userinfo(record.getMessage())[:300]
        return False

    def ended(self, ok: bool, error: str | None = None) -> None:
        if ok:
            if self.failing:
                log.info("metrics export to %s works again", self.where)
            self.failing, self._message = False, None
            return
        cause = without_userinfo(error or self._message or "the export failed")
        self.last_error = f"export to {self.where}: {cause}"[:300]
        self._message = None
        self.failing = True
        log.warning("metrics export to %s failed (dropped; the job is not affected): %s", self.where, cause)


class FigureHealth:
    """The figures that could not be read: each is logged once at warning when it starts failing (not at every
    export) and shown in the status until it reads again."""

    def __init__(self) -> None:
        self._errors: dict[str, str] = {}
        self._lock = threading.Lock()

    def read(self, what: str, reader: Callable[[], Any], default: Any) -> Any:
        """``reader()``, or ``default`` when it raises (the failure kept under ``what``)."""
        try:
            value = reader()
        except Exception as exc:  # noqa: BLE001 - a figure must never fail the job; it shows as failing
            error = without_userinfo(f"{what} not read: {type(exc).__name__}: {exc}")[:300]
            with self._lock:
                first = what not in self._errors
                self._errors[what] = error
            if first:
                log.warning("metrics: %s (left out of the export until it reads again; logged once)", error)
            return default
        if what in self._errors:
            with self._lock:
                again = self._errors.pop(what, None) is not None
            if again:
                log.info("metrics: %s reads again", what)
        return value

    @property
    def last_error(self) -> str | None:
        """One failing figure's error (None when every figure reads)."""
        with self._lock:
            return next(iter(self._errors.values()), None)


def _observed(base: type, health: ExportHealth) -> type:
    """The SDK's exporter class, reporting each export's outcome to ``health``."""
    from opentelemetry.sdk.metrics.export import MetricExportResult

    class Observed(base):
        def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
            try:
                result = super().export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a failed export must never reach the job
                health.ended(False, f"{type(exc).__name__}: {exc}")
                return MetricExportResult.FAILURE
            health.ended(result == MetricExportResult.SUCCESS)
            return result

    Observed.__name__ = f"Observed{base.__name__}"
    return Observed


class JobMetrics:
    """The meter provider, its readers and the job's observable instruments."""

    def __init__(self, settings: MetricsSettings, attributes: Mapping[str, str],
                 points: Callable[[], dict[str, list[Point]]]) -> None:
        self.settings = settings
        self.attributes = dict(attributes)
        self._points = points
        self._cache: tuple[float, dict[str, list[Point]]] | None = None
        self._cache_lock = threading.Lock()
        self._provider = None
        self._server = None
        self.prometheus_port: int | None = settings.prometheus_port
        self._start_error: str | None = None
        self.figures = FigureHealth()
        #: How often the runtime looks up the newest savepoint: with each export, at most every 10 s.
        self.savepoint_lookup_seconds = max(settings.interval_seconds, SAVEPOINT_LOOKUP_SECONDS)
        where = settings.endpoint or "the OTLP default endpoint"
        self.health = ExportHealth(without_userinfo(where)) if OTLP in settings.exporters else None

    def start(self) -> None:
        """Make the readers (the OTLP one starts the SDK's export thread) and register the instruments.

        A failure here (an exporter package missing, say) is logged and shown in the status: the job runs on.
        """
        if self._provider is not None:
            return
        try:
            self._start()
        except Exception as exc:  # noqa: BLE001 - metrics must never stop the job
            self._start_error = f"the metrics export could not start: {type(exc).__name__}: {exc}"[:300]
            log.error("metrics: %s", self._start_error)

    def _start(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource

        readers = []
        if OTLP in self.settings.exporters:
            readers.append(self._otlp_reader())
        if CONSOLE in self.settings.exporters:
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(),
                                                         self.settings.interval_seconds * 1000))
        if PROMETHEUS in self.settings.exporters:
            reader = self._prometheus_reader()
            if reader is not None:
                readers.append(reader)
        resource = Resource({"service.name": self.settings.service_name, "telemetry.sdk.language": "python",
                             **self.settings.resource_attributes})
        self._provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
        meter = self._provider.get_meter("airflow_kafka_stream")
        for spec in METRICS:
            make = meter.create_observable_counter if spec.kind == "counter" else meter.create_observable_gauge
            make(spec.name, callbacks=[self._callback(spec.name)], unit=spec.unit, description=spec.description)
        log.info("metrics: exporting %s every %gs%s", ", ".join(self.settings.exporters),
                 self.settings.interval_seconds,
                 f"; Prometheus scrape endpoint on port {self.prometheus_port}" if self._server else "")

    def _otlp_reader(self):
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        if self.settings.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self.health)
        exporter = _observed(OTLPMetricExporter, self.health)(endpoint=self.settings.export_endpoint,
                                                              timeout=self.settings.otlp_timeout_seconds)
        return PeriodicExportingMetricReader(exporter, export_interval_millis=self.settings.interval_seconds * 1000,
                                             export_timeout_millis=self.settings.timeout_seconds * 1000)

    def _prometheus_reader(self):
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=True)
        try:
            self._server, _thread = start_http_server(self.settings.prometheus_port or 0,
                                                      addr=self.settings.prometheus_host, registry=registry)
        except OSError as exc:  # e.g. the port is taken (a standby on the same host): the job runs on without it
            self._start_error = f"the Prometheus endpoint could not listen on port {self.settings.prometheus_port}: {exc}"
            log.error("metrics: %s", self._start_error)
            return None
        self.prometheus_port = self._server.server_port
        return PrometheusMetricReader(registry=registry)

    def _callback(self, name: str):
        from opentelemetry.metrics import Observation

        def observe(_options):
            return self.figures.read(name, lambda: [Observation(value, attributes)
                                                    for value, attributes in self._current().get(name, [])], [])

        return observe

    def _current(self) -> dict[str, list[Point]]:
        """The points of this collection: every instrument's callback of one collection shares one snapshot."""
        with self._cache_lock:
            now = time.monotonic()
            if self._cache is None or now - self._cache[0] > 0.5:
                points = self.figures.read("the job's figures", self._points, None)
                if points is None:
                    return {}
                self._cache = (now, points)
            return self._cache[1]

    def status_field(self) -> dict[str, Any]:
        """``status.json``'s ``metrics``: the exporters, whether the export or a figure fails, its last error,
        the port."""
        exporting = self.health is not None and self.health.failing
        figure_error = self.figures.last_error
        failing = self._start_error is not None or exporting or figure_error is not None
        error = self._start_error or (self.health.last_error if exporting else None) or figure_error
        return {"exporters": list(self.settings.exporters), "failing": failing, "last_error": error,
                "prometheus_port": self.prometheus_port if self._server is not None else None}

    def close(self, timeout: float = CLOSE_TIMEOUT_SECONDS) -> None:
        """One last export (the final state, ``up`` 0), bounded by ``timeout``; the endpoint goes away."""
        provider, self._provider = self._provider, None
        if provider is not None:
            self._cache = None
            if self.health is not None and self.health.failing:
                timeout = min(timeout, 0.5)

            def shutdown() -> None:
                try:
                    provider.shutdown(timeout_millis=timeout * 1000)
                except Exception as exc:  # noqa: BLE001 - e.g. the last export did not finish in time
                    log.info("metrics: the last export did not complete: %s", exc)

            done = threading.Thread(target=shutdown, name="metrics-shutdown", daemon=True)
            done.start()
            done.join(timeout)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self.health is not None:
            for name in EXPORTER_LOGGERS:
                logging.getLogger(name).removeFilter(self.health)


def metrics_settings(config, env: Mapping[str, str] | None = None) -> MetricsSettings | None:
    """The job's metrics settings (refusing a malformed one, named); None when nothing is configured."""
    return read_settings(os.environ if env is None else env, config.prometheus_port)


class RuntimeMetrics:
    """The runtime's metrics: the export from ``run`` to the end, fed by the status document and each batch.

    Made only when :func:`metrics_settings` found settings (read first, at the runtime's construction). It owns
    the last batch's figures and the newest savepoint seen; it reads the last offsets from the shared
    :class:`RunState`, the silence from the heartbeat and the watermarks from the time-lag sampler.
    """

    def __init__(self, settings: MetricsSettings, run: RunState, config, home, *,
                 status: Callable[[], dict[str, Any]], silence: Callable[[], float], time_lag) -> None:
        self.run = run
        self.config = config
        self.home = home
        self._status = status
        self._silence = silence
        self.time_lag = time_lag
        self._metric_batch: BatchFigures | None = None
        self._savepoint_seen: tuple[float, float | None] = (float("-inf"), None)
        self._standby_seen: tuple[float, bool | None] = (float("-inf"), False)
        self.job_metrics = JobMetrics(settings, job_attributes(config.job_name, config.app_version),
                                      self._metric_points)

    def on_batch(self, progress) -> None:
        self._metric_batch = batch_figures(progress.batchId, progress.numInputRows or 0, progress.durationMs,
                                           getattr(progress, "latest_offsets", None), progress.end_offsets)

    def _metric_points(self) -> dict[str, list[Point]]:
        age = self._silence()
        batch = self._metric_batch
        if batch is None or batch.lag_records is None:
            lag = self._watermark_lag()
            if lag is not None:
                batch = (BatchFigures(-1, None, None, lag) if batch is None else
                         BatchFigures(batch.batch_id, batch.duration_seconds, batch.rows_per_second, lag))
        return metric_points(self._status(), self.job_metrics.attributes, batch, age, self._newest_savepoint(),
                             time.time(), self._hot_standby_ready())

    def _watermark_lag(self) -> dict | None:
        """Records after the last committed offsets up to the high watermarks, per partition: the watermarks the
        time-lag sampler read at its last look (at most a heartbeat interval old), not a request of its own."""
        with self.run.lock:
            offsets = self.run.last_offsets
        highs = self.time_lag.highs()
        if not offsets or not highs:
            return None
        return partition_lag(highs, offsets)

    def _newest_savepoint(self) -> float | None:
        """When the job's newest savepoint was taken (epoch), looked up once per export interval at most (a
        lookup that fails keeps the last one found and shows as failing)."""
        looked_at, epoch = self._savepoint_seen
        if time.monotonic() - looked_at >= self.job_metrics.savepoint_lookup_seconds:
            epoch = self.job_metrics.figures.read("savepoint.age", self._look_up_newest_savepoint, epoch)
            self._savepoint_seen = (time.monotonic(), epoch)
        return epoch

    def _hot_standby_ready(self) -> bool | None:
        """Whether the job's hot standby is READY (a live record: its heartbeat fresh), looked up at the savepoint
        lookup's pace; the last answer while a lookup fails (shown as failing)."""
        looked_at, ready = self._standby_seen
        if time.monotonic() - looked_at >= self.job_metrics.savepoint_lookup_seconds:
            ready = self.job_metrics.figures.read("hot_standby.ready", self._look_up_hot_standby, ready)
            self._standby_seen = (time.monotonic(), ready)
        return ready

    def _look_up_hot_standby(self) -> bool:
        record = self.home.standby_record()
        return (is_hot(record) and record.get("state") == StandbyState.READY
                and is_live(record, None, datetime.now(UTC)))

    def _look_up_newest_savepoint(self) -> float | None:
        manifests = list_savepoints(self.home.savepoints_url, self.config.storage_options)
        return manifests[-1].created_at.timestamp() if manifests else None
