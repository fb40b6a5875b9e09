"""The driver's metrics through OpenTelemetry, from the example pipeline run as a real driver process.

An OTLP/HTTP receiver in the test (``tests/otlp_receiver.py``, decoding ``ExportMetricsServiceRequest``
with opentelemetry-proto) gets every metric docs/metrics.md lists (``tests/metrics_doc.py``), savepoint age
included, with their names, attributes and values; the Prometheus endpoint serves every documented name, and
a real Prometheus server scraping it answers the documented queries by the job's ``stream_job`` label;
nothing configured starts nothing; a malformed setting is refused at start, named, and ``submit`` refuses it
before launching anything; an endpoint that refuses connections leaves the job running with
``metrics.failing``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest

from airflow_kafka_stream.core.metrics_settings import JOB_LABEL
from airflow_kafka_stream.ops import savepoints
from airflow_kafka_stream.storage.files import CLIENT_CONFIG_ENV
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.integration.cli_helpers import CONSOLE_SCRIPT, file_tree, write_job_json
from tests.integration.lifecycle.test_exactly_once import PARTITIONS, Pipeline, end_offsets, events, pipelines  # noqa: F401
from tests.kafka_utils import create_topic, produce, unique
from tests.metrics_doc import dashboard_queries, documented_metrics, documented_queries, shipped_alert_expressions
from tests.otlp_receiver import OtlpReceiver
from tests.prometheus_server import PrometheusServer

pytestmark = pytest.mark.integration

SECRET = "m3tr1c-" + "Vq7Xk2"
RESOURCE_SECRET = "hunter" + "2-res"


def driver_env(**more: str) -> dict[str, str]:
    """The test's environment without any OTEL_* of its own, the client settings with an unused secret, and ``more``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT"}
    env[CLIENT_CONFIG_ENV] = json.dumps({"sasl.username": "svc-metrics", "sasl.password": SECRET})
    return {**env, **more}


def start(tmp_path, kafka_bootstrap, pipelines, env, *extra, records: int = 60):  # noqa: F811 - the fixture
    topic = create_topic(kafka_bootstrap, unique("metrics"), PARTITIONS)
    produce(kafka_bootstrap, topic, events(0, records))
    produce(kafka_bootstrap, topic, [("pill", "this is not json")], partition=0)
    run = Pipeline(tmp_path, kafka_bootstrap, topic, unique("metrics-group"), "--max-offsets-per-trigger", "20",
                   "--app-version", "7", *extra, env=env)
    pipelines.append(run)
    return run, topic


def test_every_documented_metric_reaches_otlp_and_prometheus_without_secrets(kafka_bootstrap, tmp_path,
                                                                             pipelines):  # noqa: F811
    receiver = OtlpReceiver()
    try:
        env = driver_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_METRIC_EXPORT_INTERVAL="500",
                         OTEL_RESOURCE_ATTRIBUTES=f"team=data,db.password={RESOURCE_SECRET}",
                         AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT="0", OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1")
        # Through the transactional Kafka sink, whose metrics only a job writing through it exports.
        output = create_topic(kafka_bootstrap, unique("metrics-out"), PARTITIONS)
        run, topic = start(tmp_path, kafka_bootstrap, pipelines, env, "--output-topic", output)
        run.wait_for_offsets(topic, end_offsets(kafka_bootstrap, topic), timeout=300)  # a loaded machine is slow
        run.wait_for(lambda: run.status().get("dead_letters") == 1, "the poison pill to be counted")
        last_batch = run.status()["last_batch_id"]
        job = {JOB_LABEL: "home", "app_version": "7"}

        def value(name: str, **attrs) -> float | None:
            return receiver.latest().get((f"airflow_kafka_stream.{name}", tuple(sorted({**job, **attrs}.items()))))

        run.wait_for(lambda: value("batch.last_committed") == last_batch and value("dead_letters") == 1
                     and value("lag.seconds", topic=topic, partition=0) is not None,
                     "the receiver to get the last batch, the dead letter and the time lag", timeout=90)
        assert value("up") == 1.0 and value("state") == 2.0, "running: up, state 2"
        assert value("group_commits", outcome="succeeded") >= 1 and value("group_commits", outcome="failed") == 0
        assert 0 <= value("heartbeat.age") < 10
        assert value("batch.duration") > 0 and value("batch.rows_per_second") >= 0
        assert value("sink.transactions", outcome="committed") >= 1 and value("sink.transactions", outcome="fenced") == 0
        assert value("sink.transaction.duration") > 0
        # Caught up: nothing waits (the watermarks of driver-side reads are looked up at most every 5 s).
        run.wait_for(lambda: all(value("lag.records", topic=topic, partition=p) == 0 for p in range(PARTITIONS))
                     and all(value("lag.seconds", topic=topic, partition=p) == 0 for p in range(PARTITIONS)),
                     "no lag in records or seconds on every partition", timeout=30)

        # A savepoint taken while it runs: its age is exported within a lookup (every 10 s at this interval).
        taken = savepoints.create(JobHome(str(run.home)))
        documented = documented_metrics()
        run.wait_for(lambda: set(documented) <= receiver.names(), "every documented metric at the receiver: "
                     f"{sorted(set(documented) - receiver.names())} missing", timeout=45)
        assert 0 <= value("savepoint.age") < 60, taken
        assert run.status()["metrics"]["failing"] is False, run.status()["metrics"]

        # No secret in any attribute, the job's or the resource's.
        with receiver.lock:
            attributes = [json.dumps([attrs, resource]) for _n, _v, attrs, resource in receiver.points]
        assert not [a for a in attributes if SECRET in a or RESOURCE_SECRET in a or "password" in a]
        assert '"team": "data"' in attributes[0]

        # The Prometheus endpoint serves every documented metric under its documented name.
        metrics = run.status()["metrics"]
        assert metrics["exporters"] == ["otlp", "prometheus"] and metrics["failing"] is False, metrics
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics['prometheus_port']}/metrics", timeout=10).read()
        served = {line.split()[2] for line in text.decode().splitlines() if line.startswith("# TYPE")}
        assert not {n for n in documented.values() if n not in served}, f"not served; served: {sorted(served)}"
        assert SECRET.encode() not in text and RESOURCE_SECRET.encode() not in text

        # A real Prometheus scraping the endpoint answers the documented queries by the job's name.
        scraped_by_prometheus(metrics["prometheus_port"], documented)

        run.request_stop()
        assert run.wait_exit() == 0, run.log_tail()
        assert value("up") == 0.0 and value("state") == 0.0, "the last export says it stopped"
    finally:
        receiver.close()


def scraped_by_prometheus(port: int, documented: dict[str, str]) -> None:
    """Prometheus scrapes the driver as the scrape job ``kafka-stream-drivers``: each documented metric and
    each documented panel query has series labelled ``stream_job="home"`` (the job's name, not renamed to
    ``exported_job``, not the scrape job's), every shipped alert expression is valid PromQL and every query of the shipped dashboard finds the job's series."""
    prometheus = PrometheusServer([f"127.0.0.1:{port}"])
    try:
        def of_the_job(series: list[dict]) -> bool:
            return bool(series) and all(s["metric"].get(JOB_LABEL) == "home" for s in series)

        prometheus.wait_for(f'airflow_kafka_stream_up{{{JOB_LABEL}="home"}}', of_the_job, timeout=60)
        for name in documented.values():
            series = prometheus.wait_for(name, of_the_job, timeout=10)
            assert all(s["metric"]["job"] == "kafka-stream-drivers" and "exported_job" not in s["metric"]
                       for s in series), series
        for expression in documented_queries():
            prometheus.wait_for(expression, of_the_job, timeout=15)
        for expression in shipped_alert_expressions():
            prometheus.query(expression)  # valid PromQL (an alert that does not fire has no series)
        for expression in dashboard_queries():
            if not expression.startswith("label_values"):  # a Grafana function, not PromQL
                prometheus.wait_for(expression.replace("$stream_job", "home"), of_the_job, timeout=15)
        lag = prometheus.query(documented_queries()[0])
        assert {s["metric"]["partition"] for s in lag} == {str(p) for p in range(PARTITIONS)}, lag
    finally:
        prometheus.close()


def test_nothing_configured_starts_no_exporter_and_sends_nothing(kafka_bootstrap, tmp_path, pipelines):  # noqa: F811
    try:  # where the SDK's OTLP exporter sends by default: an exporter started by mistake would show here
        receiver = OtlpReceiver(port=4318)
    except OSError:
        pytest.skip("port 4318 is taken on this machine")
    try:
        run, topic = start(tmp_path, kafka_bootstrap, pipelines, driver_env(OTEL_METRIC_EXPORT_INTERVAL="200"),
                           "--available-now", records=20)
        assert run.wait_exit() == 0, run.log_tail()
        assert run.status()["state"] == "STOPPED"
        assert run.status()["metrics"] is None, "metrics off: none in the status"
        assert receiver.requests == 0
        assert "metrics: exporting" not in run.log_tail()
    finally:
        receiver.close()


def test_malformed_interval_is_refused_at_start_naming_it(kafka_bootstrap, tmp_path, pipelines):  # noqa: F811
    env = driver_env(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318", OTEL_METRIC_EXPORT_INTERVAL="every minute")
    run, _topic = start(tmp_path, kafka_bootstrap, pipelines, env, records=5)
    assert run.wait_exit() != 0
    assert "InvalidInputError: OTEL_METRIC_EXPORT_INTERVAL='every minute'" in run.log_tail(), run.log_tail()
    assert run.status() == {}, "refused before it took the job: no status written"


SUBMIT_REFUSALS = [
    # id, the submitting environment, extra options, what the error names, why
    ("interval", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                  "OTEL_METRIC_EXPORT_INTERVAL": "every minute"}, [], ["OTEL_METRIC_EXPORT_INTERVAL='every minute'", "OTEL_METRIC_EXPORT_INTERVAL=60000",
          "the environment of this submit"],
     "a client-mode driver inherits the submit's environment: its bad interval is refused, with an example"),
    ("prometheus-port", {"AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT": "99999"}, [],
     ["AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT='99999' is not a port"], "a port outside 0-65535"),
    ("cluster-driver-env", {}, ["--master", "yarn", "--deploy-mode", "cluster", "--job-home-shared",
                                "--conf", "spark.yarn.appMasterEnv.OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318"],
     ["OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL", "spark.yarn.appMasterEnv.",
      "spark_conf: --conf"],
     "a cluster-mode driver gets its variables from Spark settings: the refusal names the --conf"),
]


@pytest.mark.parametrize(("case", "bad", "options", "named", "why"), SUBMIT_REFUSALS,
                         ids=[c[0] for c in SUBMIT_REFUSALS])
def test_submit_refuses_bad_metrics_settings_before_launching_anything(tmp_path, case, bad, options, named, why):
    """``submit`` exits 2 at once, naming the variable and how to fix it; no driver is launched (the
    spark-submit given would leave a mark) and the job home is as it was."""
    home = tmp_path / "home"
    write_job_json(home, "127.0.0.1:9", "metrics-group", ["orders"])
    before = file_tree(home)
    marker = tmp_path / "spark-submit-ran"
    fake = tmp_path / "spark-submit"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    started = time.monotonic()
    done = subprocess.run([CONSOLE_SCRIPT, "submit", "--job-home", str(home), "--app-version", "2", "--topic",
                           "orders", "--group", "metrics-group", "--output", str(tmp_path / "out"), "--no-wait",
                           "--spark-submit", str(fake), *options],
                          env={**driver_env(), **bad}, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, (why, done.stdout, done.stderr)
    for text in named:
        assert text in done.stderr, (why, done.stderr)
    assert "nothing was launched" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists(), "no driver was launched"
    assert file_tree(home) == before, "the job home is unchanged (no history record, no lock, no submission)"
    assert elapsed < 20, f"refusing took {elapsed:.1f}s"


def test_a_refusing_endpoint_leaves_the_job_running_and_says_metrics_fail(kafka_bootstrap, tmp_path,
                                                                          pipelines):  # noqa: F811
    with socket.socket() as probe:  # a port nobody listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = driver_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_METRIC_EXPORT_INTERVAL="500",
                     OTEL_EXPORTER_OTLP_TIMEOUT="1")
    run, topic = start(tmp_path, kafka_bootstrap, pipelines, env)
    run.wait_for_offsets(topic, end_offsets(kafka_bootstrap, topic))
    failing = run.wait_for(lambda: (run.status().get("metrics") or {}).get("failing") and run.status()["metrics"],
                           "metrics.failing in the status", timeout=60)
    assert failing["last_error"] and failing["exporters"] == ["otlp"], failing
    # The job goes on: new records are processed while every export fails.
    produce(kafka_bootstrap, topic, events(100, 30))
    run.wait_for_offsets(topic, end_offsets(kafka_bootstrap, topic))
    assert run.status()["state"] == "RUNNING"
    assert run.log_tail().count("metrics export to") >= 1
    run.request_stop()
    assert run.wait_exit(60) == 0, run.log_tail()
