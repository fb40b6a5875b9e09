"""The graceful-stop handshake of the kafka_stream source (option drainPath)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def _wait(predicate, timeout: float = 60, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("read_mode", ["executors", "driver"])
def test_stop_request_drains_without_new_batches(spark, kafka_bootstrap, tmp_path, read_mode):
    name = create_topic(kafka_bootstrap, unique("drain"), 2)
    produce(kafka_bootstrap, name, [(None, f"a{i}") for i in range(3)], partition=0)
    control = tmp_path / "control"
    control.mkdir()
    collected: list = []
    query = (
        spark.readStream.format("kafka_stream")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", name)
        .option("startingOffsets", "earliest")
        .option("drainPath", str(control))
        .option("readMode", read_mode)
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .writeStream.foreachBatch(lambda batch, _id: collected.extend(batch.collect()))
        .trigger(processingTime="300 milliseconds")
        .option("checkpointLocation", str(tmp_path / f"ckpt-{uuid.uuid4().hex[:6]}"))
        .start()
    )
    try:
        _wait(lambda: len(collected) == 3, what="the first batch")
        (control / "stop").write_text(json.dumps({"requested_at": "now", "by": "test"}))
        drained = _wait(lambda: (control / "drained.json").exists(), what="drained.json")
        assert drained
        produce(kafka_bootstrap, name, [(None, "late")], partition=1)
        time.sleep(2)  # several triggers: none may plan a batch for the late record
        assert len(collected) == 3
        body = json.loads((control / "drained.json").read_text())
        assert body["offsets"] == {name: {"0": 3, "1": 0}}
        assert body["at"].endswith("+00:00")
        assert not list(control.glob("drained.json.tmp*"))
    finally:
        query.stop()
    committed = [p["sources"][0]["endOffset"] for p in query.recentProgress if p["numInputRows"]]
    assert len(committed) == 1
