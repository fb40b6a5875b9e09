"""runtime.metrics.JobMetrics against a receiver in the test: the SDK's reader exports, a refusing endpoint is
flagged (not waited for), and the end of a run waits a bounded time. The driver's run is tests/integration's."""

from __future__ import annotations

import socket
import threading
import time

from airflow_kafka_stream.runtime.metric_values import job_attributes, metric_points, read_settings
from airflow_kafka_stream.runtime.metrics import JobMetrics
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
