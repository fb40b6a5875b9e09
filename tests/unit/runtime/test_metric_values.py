"""runtime.metric_values (what a driver exports and how it reads its settings), the Airflow side's pass-through of
``[metrics] otel_*`` and its upgrade figures, and the metrics export as the status, its text and the job page show it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.metrics_settings import JOB_LABEL, read_settings
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.runtime.metric_values import (
    METRIC_NAMES,
    batch_figures,
    job_attributes,
    metric_points,
    partition_lag,
)

EP = "http://collector:4318"

SETTINGS = [
    # id, environment, prometheus_port (StreamConfig), expected exporters (None: off), why
    ("off-nothing", {}, None, None, "nothing configured: no exporter, no thread"),
    ("off-only-interval", {"OTEL_METRIC_EXPORT_INTERVAL": "1000"}, None, None, "an interval alone asks for nothing"),
    ("otlp-endpoint", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP}, None, ("otlp",), "an endpoint turns OTLP on"),
    ("otlp-signal-endpoint", {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": EP + "/v1/metrics"}, None, ("otlp",),
     "the metrics signal's own endpoint counts too"),
    ("none-wins", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_METRICS_EXPORTER": "none"}, None, None,
     "OTEL_METRICS_EXPORTER=none turns metrics off"),
    ("sdk-disabled", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_SDK_DISABLED": "true"}, None, None,
     "OTEL_SDK_DISABLED is OpenTelemetry's off switch"),
    ("prometheus-env-port", {"AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT": "9464"}, None, ("prometheus",),
     "a port alone starts the scrape endpoint"),
    ("prometheus-config-port", {}, 0, ("prometheus",), "StreamConfig.prometheus_port does the same"),
    ("both", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP}, 9464, ("otlp", "prometheus"), "push and scrape together"),
    ("named-prometheus", {"OTEL_METRICS_EXPORTER": "prometheus"}, None, ("prometheus",),
     "OpenTelemetry's own switch, default port 9464"),
    ("named-otlp-default-endpoint", {"OTEL_METRICS_EXPORTER": "otlp"}, None, ("otlp",),
     "named explicitly, OTLP goes to the SDK's default endpoint"),
]


@pytest.mark.parametrize(("case", "env", "port", "expected", "why"), SETTINGS, ids=[c[0] for c in SETTINGS])
def test_read_settings(case, env, port, expected, why):
    settings = read_settings(env, port)
    assert (settings.exporters if settings else None) == expected, why


REFUSED = [
    # id, environment, prometheus_port, the setting named, why
    ("interval-text", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_METRIC_EXPORT_INTERVAL": "often"}, None,
     "OTEL_METRIC_EXPORT_INTERVAL", "the SDK would fall back to 60 s silently; a start names it instead"),
    ("interval-zero", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_METRIC_EXPORT_INTERVAL": "0"}, None,
     "OTEL_METRIC_EXPORT_INTERVAL", "an interval must be positive"),
    ("timeout-negative", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_METRIC_EXPORT_TIMEOUT": "-1"}, None,
     "OTEL_METRIC_EXPORT_TIMEOUT", "a timeout must be positive"),
    ("otlp-timeout", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_EXPORTER_OTLP_TIMEOUT": "ten"}, None,
     "OTEL_EXPORTER_OTLP_TIMEOUT", "the exporter's timeout too"),
    ("protocol", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, None,
     "OTEL_EXPORTER_OTLP_PROTOCOL", "the Python SDK exports http/protobuf or grpc only"),
    ("endpoint-no-scheme", {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, None, "OTEL_EXPORTER_OTLP_ENDPOINT",
     "an endpoint is a URL"),
    ("endpoint-bad-port", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:43x8"}, None,
     "OTEL_EXPORTER_OTLP_ENDPOINT", "a port that is not a number"),
    ("exporter-unknown", {"OTEL_METRICS_EXPORTER": "zipkin"}, None, "OTEL_METRICS_EXPORTER",
     "an exporter this driver does not have"),
    ("port-text", {"AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT": "http"}, None, "AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT",
     "a port is a number"),
    ("port-range", {}, 70000, "prometheus_port", "a port is at most 65535"),
    ("resource-no-equals", {"OTEL_EXPORTER_OTLP_ENDPOINT": EP, "OTEL_RESOURCE_ATTRIBUTES": "team=data,prod"}, None,
     "OTEL_RESOURCE_ATTRIBUTES", "each resource attribute is key=value"),
]


@pytest.mark.parametrize(("case", "env", "port", "setting", "why"), REFUSED, ids=[c[0] for c in REFUSED])
def test_malformed_settings_are_refused_by_name(case, env, port, setting, why):
    with pytest.raises(InvalidInputError) as raised:
        read_settings(env, port)
    # Named in the message, as the runtime's other refusals (StreamConfig.validate) name theirs: a driver's
    # environment variable is no front end's argument.
    assert str(raised.value).startswith(setting) or f" {setting}" in str(raised.value), why


def test_settings_values_and_no_secret_resource_attribute():
    settings = read_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": EP + "/", "OTEL_METRIC_EXPORT_INTERVAL": "2500",
                              "OTEL_RESOURCE_ATTRIBUTES": "team=data, db.password=hunter2,api_key=k1,x.token=t",
                              "OTEL_SERVICE_NAME": "orders"})
    assert settings.export_endpoint == EP + "/v1/metrics" and settings.interval_seconds == 2.5
    assert settings.resource_attributes == {"team": "data"}, "secret-looking keys never become attributes"
    assert settings.service_name == "orders"
    grpc = read_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc.export_endpoint == "http://c:4317", "gRPC takes the endpoint as it is"


JOB = job_attributes("orders", "7")

POINTS = [
    # id, status document, metric, expected points (value, extra attributes), why
    ("up-running", {"state": "RUNNING"}, "up", [(1.0, {})], "a live state is up"),
    ("up-stopped", {"state": "STOPPED"}, "up", [(0.0, {})], "a final state is down"),
    ("up-unknown", {"state": "PAUSED"}, "up", [(0.0, {})], "an unknown state is not up"),
    ("state-draining", {"state": "DRAINING"}, "state", [(3.0, {})], "draining is 3"),
    ("state-failed", {"state": "FAILED"}, "state", [(4.0, {})], "failed is 4"),
    ("state-absent", {}, "state", [], "no state, no point"),
    ("last-batch", {"last_batch_id": 41}, "batch.last_committed", [(41.0, {})], "the last committed batch"),
    ("no-batch", {"last_batch_id": None}, "batch.last_committed", [], "before a batch, no point"),
    ("commits", {"group_commits": {"successes": 9, "failures": 2}}, "group_commits",
     [(9.0, {"outcome": "succeeded"}), (2.0, {"outcome": "failed"})], "both outcomes, counted this run"),
    ("dead-letters", {"dead_letters": 3}, "dead_letters", [(3.0, {})], "records sent aside"),
    ("time-lag", {"time_lag": {"partitions": {"t": {"1": 0.0, "0": 90.5}}, "max_seconds": 90.5,
                               "last_batch_delay_seconds": 1.5}}, "lag.seconds",
     [(90.5, {"topic": "t", "partition": 0}), (0.0, {"topic": "t", "partition": 1})],
     "each partition's seconds, partition as a number"),
    ("time-lag-odd", {"time_lag": {"partitions": {"t": {"x": 1.0, "0": "slow"}}}}, "lag.seconds", [],
     "odd values are left out, never raise"),
    ("batch-delay", {"time_lag": {"partitions": {}, "last_batch_delay_seconds": 1.5}}, "batch.delay", [(1.5, {})],
     "the last batch's end-to-end delay"),
    ("sink-transactions", {"kafka_sink": {"transactions": {"committed": 7, "aborted": 1, "skipped": 2}}},
     "sink.transactions", [(7.0, {"outcome": "committed"}), (1.0, {"outcome": "aborted"}), (0.0, {"outcome": "fenced"})],
     "each outcome counted this run; a batch skipped as already committed is no transaction"),
    ("sink-duration", {"kafka_sink": {"last_transaction_seconds": 0.025}}, "sink.transaction.duration",
     [(0.025, {})], "the last committed transaction's duration"),
    ("no-sink", {}, "sink.transactions", [], "a job without the Kafka sink exports no sink series"),
]


@pytest.mark.parametrize(("case", "doc", "metric", "expected", "why"), POINTS, ids=[c[0] for c in POINTS])
def test_metric_points(case, doc, metric, expected, why):
    points = metric_points(doc, JOB, None, None, None, now=1000.0)
    assert set(points) == set(METRIC_NAMES)
    assert points[f"airflow_kafka_stream.{metric}"] == [(v, {**JOB, **extra}) for v, extra in expected], why


def test_batch_and_age_points():
    batch = batch_figures(5, 500, {"triggerExecution": 2000}, {("t", 0): 120, ("t", 1): 50},
                          {("t", 0): 100, ("t", 1): 60})
    assert batch.lag_records == {("t", 0): 20, ("t", 1): 0}, "never below 0 (read past the planned watermark)"
    points = metric_points({"state": "RUNNING"}, JOB, batch, 1.25, 400.0, now=1000.0)
    assert points["airflow_kafka_stream.batch.rows_per_second"] == [(250.0, JOB)]
    assert points["airflow_kafka_stream.batch.duration"] == [(2.0, JOB)]
    assert points["airflow_kafka_stream.lag.records"] == [(20.0, {**JOB, "topic": "t", "partition": 0}),
                                                          (0.0, {**JOB, "topic": "t", "partition": 1})]
    assert points["airflow_kafka_stream.heartbeat.age"] == [(1.25, JOB)]
    assert points["airflow_kafka_stream.savepoint.age"] == [(600.0, JOB)]
    assert partition_lag(None, {("t", 0): 1}) is None
    assert batch_figures(1, 0, {}, None, None).rows_per_second is None
    assert job_attributes("j", None) == {JOB_LABEL: "j"}, "no version, no attribute"


def test_status_document_metrics_field_and_texts():
    from airflow_kafka_stream.plugins.job_page_html import _summary
    from airflow_kafka_stream.render.job import status_text

    doc = StatusDocument.parse({"state": "RUNNING", "metrics": {"exporters": ["otlp"], "failing": True,
                                                                "last_error": "refused", "prometheus_port": None}})
    assert doc.metrics.failing and doc.metrics.exporters == ("otlp",) and doc.metrics.last_error == "refused"
    assert StatusDocument.parse({"state": "RUNNING"}).metrics is None, "absent when metrics are off"
    assert StatusDocument.parse({"state": "RUNNING", "metrics": "x"}).metrics is None, "odd values read as absent"
    html = _summary({"state": "RUNNING", "metrics": {"failing": True, "last_error": "refused"}})
    assert ">Metrics<" in html and "failing: refused" in html
    from airflow_kafka_stream.ops.results import JobStatus

    status = JobStatus("h", "j", "RUNNING", True, False, "1", 1.0, 1, 3, None, "g", ["t"], None, None, None, None,
                       None, None, metrics={"failing": True, "last_error": "refused"})
    assert "METRICS         failing: refused" in status_text(status)


AIRFLOW = [
    # id, [metrics] settings, expected environment, why
    ("off", {"otel_on": "False", "otel_host": "c"}, {}, "otel_on false: nothing passed"),
    ("on", {"otel_on": "True", "otel_host": "c", "otel_port": "4318", "otel_interval_milliseconds": "30000",
            "otel_service": "airflow"},
     {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
      "OTEL_METRICS_EXPORTER": "otlp", "OTEL_METRIC_EXPORT_INTERVAL": "30000", "OTEL_SERVICE_NAME": "airflow"},
     "Airflow's OTLP/HTTP collector, interval and service"),
    ("ssl", {"otel_on": "true", "otel_host": "c", "otel_port": "443", "otel_ssl_active": "True"},
     {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:443", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
      "OTEL_METRICS_EXPORTER": "otlp"}, "otel_ssl_active: https"),
]


@pytest.mark.parametrize(("case", "settings", "expected", "why"), AIRFLOW, ids=[c[0] for c in AIRFLOW])
def test_airflow_otel_settings_pass_through(case, settings, expected, why):
    from airflow_kafka_stream.hooks.spark_driver import otel_env_from_airflow

    assert otel_env_from_airflow(settings) == expected, why
    assert read_settings(expected) is None if not expected else read_settings(expected).exporters == ("otlp",)


def test_a_job_with_its_own_otel_settings_keeps_them():
    from airflow_kafka_stream.hooks.spark_driver import has_own_otel

    assert has_own_otel({"PATH": "/bin"}, {"OTEL_EXPORTER_OTLP_ENDPOINT": EP}, None)
    assert has_own_otel({"spark.yarn.appMasterEnv.OTEL_METRICS_EXPORTER": "none"})
    assert not has_own_otel({"PATH": "/bin"}, None, {"spark.executor.memory": "1g"})


def test_upgrade_duration_and_downtime():
    from airflow_kafka_stream.operators.stream_stats import upgrade_times

    t0 = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
    history = [{"operation": "stop-request", "result": "ok", "started_at": (t0 - timedelta(hours=1)).isoformat()},
               {"operation": "stop-request", "result": "ok", "started_at": t0.isoformat()},
               {"operation": "stop", "result": "ok", "started_at": (t0 + timedelta(seconds=5)).isoformat()}]
    epochs = [t0.timestamp() - 100, t0.timestamp() + 12.5, t0.timestamp() + 20]
    assert upgrade_times(history, epochs, t0 + timedelta(seconds=40)) == (40.0, 12.5)
    assert upgrade_times(history, [], t0 + timedelta(seconds=40)) == (40.0, None), "no batch of the new version yet"
    assert upgrade_times([], epochs, t0) == (None, None), "no stop request recorded: nothing to tell"
