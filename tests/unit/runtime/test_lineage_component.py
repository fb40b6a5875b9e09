"""runtime.lineage: the driver's OpenLineage events, off unless configured, never in a batch's way.

The events are validated against the OpenLineage spec's JSON schema (tests/data/openlineage). The endpoint tests
use the real client and transport: a port nobody listens on, and a server that reads a request and never answers.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from openlineage.client.serde import Serde

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.runtime import lineage as lineage_module
from airflow_kafka_stream.runtime.config import StreamConfig
from airflow_kafka_stream.runtime.lineage import LineageEmitter, RuntimeLineage
from airflow_kafka_stream.runtime.lineage_events import POSITION_SCHEMA, POSITION_SCHEMA_URL
from tests.lineage_receiver import LineageReceiver, validate_event

PARENT = "airflow/stream_submit.submit/0190a0c1-0000-7000-8000-000000000001"
ROOT = "airflow/stream_submit/0190a0c1-0000-7000-8000-000000000002"
OFFSETS = {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 7}


def config(**overrides) -> StreamConfig:
    return StreamConfig(**{"job_name": "orders", "bootstrap_servers": "b1:9092,b2:9092", "group_id": "g",
                           "topics": ["orders"], "sink_path": "/data/out", "lineage_interval_seconds": 60.0,
                           **overrides})


@pytest.fixture
def no_config_files(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))


def recording(env: dict | None = None, **overrides) -> tuple[RuntimeLineage, list[dict]]:
    sent: list[dict] = []
    env = {"OPENLINEAGE_URL": "http://unused", "OPENLINEAGE_PARENT_ID": PARENT, "OPENLINEAGE_ROOT_PARENT_ID": ROOT,
           "OPENLINEAGE_NAMESPACE": "airflow", **(env or {})}
    return RuntimeLineage(config(**overrides), env, "4.2.0",
                          send=lambda event: sent.append(json.loads(Serde.to_json(event)))), sent


def test_unconfigured_there_is_no_component_and_no_thread(no_config_files):
    before = {t.name for t in threading.enumerate()}
    assert RuntimeLineage.from_env(config(), "4.2.0", env={}) is None
    assert RuntimeLineage.from_env(config(), "4.2.0", env={"OPENLINEAGE_URL": "http://m",
                                                           "OPENLINEAGE_DISABLED": "true"}) is None
    assert "openlineage-emitter" not in {t.name for t in threading.enumerate()} - before


def test_an_openlineage_yml_in_the_working_directory_configures_it(no_config_files, tmp_path):
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: noop\n")
    found = RuntimeLineage.from_env(config(), "4.2.0", env={})
    assert found is not None
    found.end(None, None, None, False)


def test_a_run_starts_reports_its_position_at_a_bounded_rate_and_completes_one_job_with_its_parent():
    lineage, sent = recording()
    lineage.batch(2, OFFSETS)  # before START (a standby before its go): nothing
    lineage.start(OFFSETS, 3)
    for batch in range(4, 10):
        lineage.batch(batch, OFFSETS)  # one RUNNING: the interval is 60 s
    lineage.end(OFFSETS, 9, None, False)
    assert [e["eventType"] for e in sent] == ["START", "RUNNING", "COMPLETE"]
    for event in sent:
        checked = validate_event(event, {POSITION_SCHEMA_URL: POSITION_SCHEMA})
        assert {"parent", "processing_engine", "jobType", "kafkaStreamPosition"} <= set(checked)
        assert (event["job"]["namespace"], event["job"]["name"]) == ("airflow", "orders")
        assert event["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
        assert event["run"]["runId"] == lineage.run_id
        parent = event["run"]["facets"]["parent"]
        assert (parent["job"]["name"], parent["run"]["runId"]) == ("stream_submit.submit", PARENT.rsplit("/")[-1])
        assert parent["root"]["job"]["name"] == "stream_submit"
        assert [(i["namespace"], i["name"]) for i in event["inputs"]] == [("kafka://b1:9092", "orders")]
        assert [(o["namespace"], o["name"]) for o in event["outputs"]] == [("file", "/data/out")]
    running = sent[1]["inputs"][0]["inputFacets"]["kafkaStreamPosition"]
    assert (running["partitions"], running["batchId"]) == ({"0": 5, "1": 7}, 4)


def test_each_driver_run_has_its_own_run_id_under_the_same_job():
    first, second = recording()[0], recording()[0]
    assert first.run_id != second.run_id and first.job.name == second.job.name == "orders"
    for one in (first, second):
        one.end(None, None, None, False)


def test_a_failed_query_ends_its_run_with_fail_and_the_error():
    lineage, sent = recording()
    lineage.start(None, None)
    lineage.end(None, None, "StreamingQueryException: boom", False)
    assert [e["eventType"] for e in sent] == ["START", "FAIL"]
    assert "errorMessage" in validate_event(sent[1], {POSITION_SCHEMA_URL: POSITION_SCHEMA})
    assert sent[1]["run"]["facets"]["errorMessage"]["message"] == "StreamingQueryException: boom"


def test_a_driver_another_took_the_job_from_aborts_and_one_that_never_took_it_says_nothing():
    lineage, sent = recording()
    lineage.start(None, None)
    lineage.end(None, None, None, True)
    assert [e["eventType"] for e in sent] == ["START", "ABORT"]
    standby, said = recording()
    standby.end(None, None, "the upgrade ended it before its go", False)
    assert said == []


def test_a_pattern_subscription_reports_the_topics_its_batches_read():
    lineage, sent = recording(topics=[], subscribe_pattern="ord.*")
    lineage.start({TopicPartition("orders", 0): 1}, 0)
    lineage.end(None, None, None, False)
    assert [i["name"] for i in sent[0]["inputs"]] == ["orders"] and sent[1]["inputs"] == []


def test_a_bad_parent_link_is_left_out_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger=lineage_module.__name__):
        lineage, sent = recording(env={"OPENLINEAGE_PARENT_ID": "dag.task"})
    assert "is not namespace/job/runId" in caplog.text
    lineage.start(None, None)
    lineage.end(None, None, None, False)
    assert "parent" not in sent[0]["run"]["facets"]


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_bad_interval_is_refused_naming_the_variable(value, no_config_files):
    with pytest.raises(InvalidInputError, match="AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL"):
        RuntimeLineage.from_env(config(lineage_interval_seconds=None), "4.2.0",
                                env={"OPENLINEAGE_URL": "http://m", "AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL": value})


def test_a_client_configuration_that_cannot_be_built_leaves_the_job_running_without_lineage(caplog, no_config_files,
                                                                                           monkeypatch):
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "no-such-transport")
    with caplog.at_level(logging.WARNING, logger=lineage_module.__name__):
        found = RuntimeLineage.from_env(config(), "4.2.0")
    assert found is None
    assert "could not be made" in caplog.text


def test_a_send_that_fails_is_counted_and_logged_with_its_reason(caplog):
    def refuse(_event):
        raise ConnectionError("http://svc:pa55@marquez:5000/api/v1/lineage: connection refused")

    emitter = LineageEmitter(refuse, "orders")
    with caplog.at_level(logging.WARNING, logger=lineage_module.__name__):
        emitter.submit(object())
        assert emitter.close(5)
    assert (emitter.counts.failed, emitter.counts.sent) == (1, 0)
    assert "not sent: ConnectionError: http://***@marquez:5000/api/v1/lineage: connection refused" in caplog.text
    assert "pa55" not in caplog.text + str(emitter.counts.last_error), "an endpoint's credentials are masked"


def test_a_send_that_hangs_never_holds_a_batch_and_the_queue_drops_what_it_cannot_hold(caplog):
    release = threading.Event()
    emitter = LineageEmitter(lambda _event: release.wait(30), "orders", queue_size=4)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=lineage_module.__name__):
        for _ in range(50):
            emitter.submit(object())
    assert time.monotonic() - began < 0.5
    assert emitter.counts.dropped >= 45 and "dropped" in caplog.text
    began = time.monotonic()
    assert emitter.close(0.5) is False  # bounded: the run's end does not wait for a hanging endpoint
    assert time.monotonic() - began < 1.5
    release.set()


def test_a_close_that_times_out_drops_what_is_queued_so_the_thread_ends_with_its_send_in_flight():
    release, sent = threading.Event(), []
    emitter = LineageEmitter(lambda event: (release.wait(30), sent.append(event)), "orders", queue_size=10)
    for number in range(5):
        emitter.submit(number)
    assert emitter.close(0.3) is False
    release.set()  # the endpoint answers the send in flight, late
    deadline = time.monotonic() + 5
    while emitter.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not emitter.alive, "the thread ended after its send in flight"
    assert sent == [0] and emitter.counts.dropped == 4, (sent, emitter.counts)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("endpoint", ["refusing", "hanging"])
def test_a_dead_endpoint_through_the_real_client_neither_slows_batches_nor_the_end(endpoint, caplog, monkeypatch):
    server = LineageReceiver(hang=True) if endpoint == "hanging" else None
    url = server.url if server else f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT", json.dumps({"type": "http", "url": url, "timeout": 1}))
    monkeypatch.setattr(lineage_module, "CLOSE_TIMEOUT_SECONDS", 1.0)
    try:
        lineage = RuntimeLineage.from_env(config(lineage_interval_seconds=0.001), "4.2.0")
        assert lineage is not None
        began = time.monotonic()
        lineage.start(OFFSETS, 0)
        for batch in range(1, 200):
            lineage.batch(batch, OFFSETS)
        assert time.monotonic() - began < 1.0
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger=lineage_module.__name__):
            lineage.end(OFFSETS, 199, None, False)
        assert time.monotonic() - began < lineage_module.CLOSE_TIMEOUT_SECONDS + 1.0
        assert lineage.emitter.counts.sent == 0
        assert "OpenLineage events of run" in caplog.text
    finally:
        if server:
            server.close()


def test_an_unconfigured_driver_does_not_even_import_the_client(tmp_path):
    """Off means off: the runtime imported and its lineage looked up, the OpenLineage client is not loaded."""
    code = ("import sys; from airflow_kafka_stream.runtime import stream_runtime; "
            "from airflow_kafka_stream.runtime.lineage import RuntimeLineage; "
            "from airflow_kafka_stream.runtime.config import StreamConfig; "
            "c = StreamConfig(job_name='j', bootstrap_servers='b:1', group_id='g', topics=['t']); "
            "assert RuntimeLineage.from_env(c, None) is None; "
            "print(sorted(m for m in sys.modules if m.startswith('openlineage')))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_status_shows_the_run_id_and_what_became_of_its_events(no_config_files, monkeypatch):
    from airflow_kafka_stream.runtime.run_state import RunState

    monkeypatch.setenv("OPENLINEAGE__TRANSPORT", json.dumps({"type": "noop"}))
    run = RunState()
    lineage = RuntimeLineage.from_env(config(), "4.2.0", run)
    assert lineage is not None and "lineage" in run.status_parts
    lineage.start(OFFSETS, 0)
    lineage.end(OFFSETS, 0, None, False)
    assert run.status_parts["lineage"]() == {"namespace": "default", "job": "orders", "run_id": lineage.run_id, "sent": 2,
                                    "failed": 0, "dropped": 0, "last_error": None}
    assert RuntimeLineage.from_env(config(), "4.2.0", RunState(), env={}) is None


def test_an_event_that_cannot_be_built_is_counted_and_logged_and_the_run_goes_on(caplog, monkeypatch):
    lineage, sent = recording()

    def broken(*_args, **_kwargs):
        raise ValueError("bad facet")

    monkeypatch.setattr(lineage._events, "run_event", broken)
    with caplog.at_level(logging.WARNING, logger=lineage_module.__name__):
        lineage.start(OFFSETS, 0)
        lineage.batch(1, OFFSETS)
        lineage.end(OFFSETS, 1, None, False)
    assert sent == [] and lineage.emitter.counts.failed == 3
    assert "OpenLineage START event not built: bad facet" in caplog.text
