"""runtime.metrics.JobMetrics against a receiver in the test: the SDK's reader exports, a refusing endpoint is
flagged (not waited for), a figure that cannot be read is flagged and logged once, every documented metric is
served under its documented Prometheus name, and the end of a run waits a bounded time. The driver's run is
tests/integration's."""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.request

from airflow_kafka_stream.core.metrics_settings import read_settings
from airflow_kafka_stream.runtime.metric_values import (
    METRIC_NAMES,
    batch_figures,
    job_attributes,
    metric_points,
)
from airflow_kafka_stream.runtime.metrics import JobMetrics
from tests.metrics_doc import documented_metrics
from tests.otlp_receiver import OtlpReceiver

JOB = job_attributes("orders", "3")
STATUS = {"state": "RUNNING", "last_batch_id": 8, "dead_letters": 0, "group_commits": {"successes": 8}}


def metrics_for(env: dict[str, str]) -> JobMetrics:
    return JobMetrics(read_settings(env), JOB, lambda: metric_points(STATUS, JOB, None, 0.5, None, time.time()))


def wait_until(predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_exports_to_the_endpoint_and_says_it_works():
    receiver = OtlpReceiver()
    metrics = metrics_for({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_METRIC_EXPORT_INTERVAL": "100"})
    try:
        metrics.start()
        assert wait_until(lambda: "airflow_kafka_stream.batch.last_committed" in receiver.names())
        key = ("airflow_kafka_stream.batch.last_committed", tuple(sorted(JOB.items())))
        assert receiver.latest()[key] == 8.0
        assert metrics.status_field() == {"exporters": ["otlp"], "failing": False, "last_error": None,
                                          "prometheus_port": None}
    finally:
        metrics.close()
        receiver.close()
    assert not [t for t in threading.enumerate() if t.name == "OtelPeriodicExportingMetricReader" and t.is_alive()]


def test_a_refusing_endpoint_is_flagged_and_not_waited_for():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    metrics = metrics_for({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                           "OTEL_METRIC_EXPORT_INTERVAL": "100", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    metrics.start()
    try:
        assert wait_until(lambda: metrics.status_field()["failing"]), "a refused export shows as failing"
        assert f"127.0.0.1:{port}" in metrics.status_field()["last_error"]
    finally:
        began = time.monotonic()
        metrics.close()
    assert time.monotonic() - began < 1.5, "the end of a run does not wait for a failing endpoint"


def test_the_docs_list_every_metric_the_driver_exports_and_no_other():
    assert sorted(documented_metrics()) == sorted(METRIC_NAMES), \
        "docs/metrics.md's table and metric_values.METRICS must name the same metrics"


def every_point() -> dict:
    """A point for every metric: a running job with a batch, lag on a partition, a savepoint and a Kafka sink."""
    status = {**STATUS, "dead_letters": 1, "time_lag": {"partitions": {"orders": {"0": 2.5}},
                                                        "last_batch_delay_seconds": 0.5},
              "kafka_sink": {"transactions": {"committed": 7, "aborted": 1, "fenced": 0, "skipped": 1},
                             "last_transaction_seconds": 0.03}}
    batch = batch_figures(8, 40, {"triggerExecution": 400}, {("orders", 0): 12}, {("orders", 0): 10})
    return metric_points(status, JOB, batch, 0.5, time.time() - 30, time.time(), hot_standby_ready=True)


def test_every_documented_metric_is_served_under_its_documented_prometheus_name():
    assert all(every_point().values()), "the test gives every metric a value"
    metrics = JobMetrics(read_settings({"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": "0",
                                        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1"}), JOB, every_point)
    metrics.start()
    try:
        port = metrics.status_field()["prometheus_port"]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        metrics.close()
    served = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    missing = {otel: name for otel, name in documented_metrics().items() if name not in served}
    assert not missing, f"documented Prometheus names not served: {missing}; served: {sorted(served)}"


def test_a_figure_that_cannot_be_read_shows_as_failing_and_is_logged_once(caplog):
    receiver = OtlpReceiver()
    broken = {"on": True, "calls": 0}

    def points():
        broken["calls"] += 1
        if broken["on"]:
            raise TypeError("'str' object is not callable")
        return every_point()

    metrics = JobMetrics(read_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                        "OTEL_METRIC_EXPORT_INTERVAL": "100"}), JOB, points)
    caplog.set_level(logging.INFO, logger="airflow_kafka_stream.runtime.metrics")
    metrics.start()
    try:
        assert wait_until(lambda: broken["calls"] >= 4 and metrics.status_field()["failing"]), "four exports"
        field = metrics.status_field()
        assert "not read: TypeError: 'str' object is not callable" in field["last_error"], field
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "not read" in r.getMessage()]
        assert len(warnings) == 1, f"logged once, not at every export: {[r.getMessage() for r in warnings]}"
        broken["on"] = False
        assert wait_until(lambda: "airflow_kafka_stream.savepoint.age" in receiver.names())
        assert wait_until(lambda: not metrics.status_field()["failing"]), "reads again: no longer failing"
        assert metrics.status_field()["last_error"] is None
    finally:
        metrics.close()
        receiver.close()
