"""The driver's lineage with real Spark and a real broker: what a run emits, and a dead endpoint that costs it
nothing. The same small job (three batches of an available-now query) runs against a receiver, then against a
server that never answers and a port nobody listens on."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from airflow_kafka_stream.runtime import lineage as runtime_lineage
from tests.integration.lifecycle.test_runtime_lifecycle import config_for, run_available_now
from tests.kafka_utils import create_topic, produce, unique
from tests.lineage_receiver import LineageReceiver, check_driver_runs

pytestmark = pytest.mark.integration

RECORDS = 30


def _timed(monkeypatch) -> dict[str, list[float]]:
    """How long each of the runtime's calls into its lineage took (the time a batch or the end waited for it)."""
    took: dict[str, list[float]] = {"start": [], "batch": [], "end": []}
    for method in took:
        original = getattr(runtime_lineage.RuntimeLineage, method)

        def timed(self, *args, _original=original, _method=method):
            began = time.monotonic()
            try:
                return _original(self, *args)
            finally:
                took[_method].append(time.monotonic() - began)

        monkeypatch.setattr(runtime_lineage.RuntimeLineage, method, timed)
    return took


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(spark, kafka_bootstrap, tmp_path, monkeypatch, url: str, name: str):
    topic = create_topic(kafka_bootstrap, unique(f"lineage-{name}"), 1)
    produce(kafka_bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(RECORDS)])
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT", json.dumps({"type": "http", "url": url, "timeout": 2}))
    config = config_for(kafka_bootstrap, topic, job_name=f"lineage-{name}", max_offsets_per_trigger=10,
                        sink_path=str(tmp_path / name / "out"), lineage_interval_seconds=0.001)
    seen, result = run_available_now(spark, str(tmp_path / name / "home"), config)
    return topic, seen, result


def test_a_run_emits_start_running_per_batch_and_complete_and_a_dead_endpoint_costs_it_nothing(
        spark, kafka_bootstrap, tmp_path, monkeypatch):
    receiver, hanging = LineageReceiver(), LineageReceiver(hang=True)
    earlier = set(threading.enumerate())  # other tests' threads
    monkeypatch.setattr(runtime_lineage, "CLOSE_TIMEOUT_SECONDS", 1.0)
    try:
        topic, seen, result = _run(spark, kafka_bootstrap, tmp_path, monkeypatch, receiver.url, "live")
        assert (result.exit_code, seen) == (0, list(range(RECORDS)))
        events = receiver.wait_for(lambda found: any(e["eventType"] == "COMPLETE" for e in found), 30)
        runs = check_driver_runs(events, "lineage-live", "default", launched_by_tasks=False)
        (run,) = runs.values()
        assert [e["eventType"] for e in run] == ["START", "RUNNING", "RUNNING", "RUNNING", "COMPLETE"]
        positions = [e["inputs"][0]["inputFacets"]["kafkaStreamPosition"] for e in run[1:4]]
        assert [p["partitions"] for p in positions] == [{"0": 10}, {"0": 20}, {"0": 30}]
        assert all((i["namespace"], i["name"]) == (f"kafka://{kafka_bootstrap.split(',')[0]}", topic)
                   for e in run for i in e["inputs"])
        assert {(o["namespace"], o["name"]) for e in run for o in e["outputs"]} == {
            ("file", str(tmp_path / "live" / "out"))}

        for name, url in (("hanging", hanging.url), ("refused", f"http://127.0.0.1:{_closed_port()}")):
            took = _timed(monkeypatch)
            _topic, seen, result = _run(spark, kafka_bootstrap, tmp_path, monkeypatch, url, name)
            assert (result.exit_code, seen) == (0, list(range(RECORDS))), name
            # A batch never waits for the endpoint (it only queues an event); the end waits at most its bound.
            assert len(took["batch"]) == 3 and max(took["start"] + took["batch"]) < 0.2, (name, took)
            assert took["end"][0] < 1.0 + 0.5, (name, took)
            monkeypatch.undo()  # the next endpoint's calls timed afresh
            monkeypatch.setattr(runtime_lineage, "CLOSE_TIMEOUT_SECONDS", 1.0)
        # What the dead endpoints were still sent at the end was dropped: each run's sender ends with the send it
        # had in flight (the client's own retries, about 20 s at most), not after trying every queued event.
        senders = [t for t in threading.enumerate() if t.name == "openlineage-emitter" and t not in earlier]
        for sender in senders:
            sender.join(60)
        assert not [t for t in senders if t.is_alive()], "a run's lineage sender outlived its in-flight send"
    finally:
        receiver.close()
        hanging.close()
