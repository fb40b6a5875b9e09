"""Reading a partition of about 30,000 single-record batches, from its start, middle and end.

A broker answers a fetch empty when finding the records takes longer than the fetch may wait. The
test broker scans a partition's batches to find an offset, so past ~15,000 batches its answers to
the reader's short first wait (10 ms) are empty at every offset: a 25-minute soak of the example
pipeline wedged there after a restore. Real Kafka does the same when it serves old offsets from
tiered storage. The reader raises its fetch wait when records it knows exist keep not coming; these
tests read such a partition with default options, in every read mode and with both readers, and
restart the example pipeline from a savepoint taken deep inside it.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from airflow_kafka_stream.source.arrow_rows import read_range
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.source_options import parse_source_options
from tests.integration.cli_helpers import cli_subprocess
from tests.integration.lifecycle.test_exactly_once import Pipeline, pipelines, sink_rows  # noqa: F401 - a fixture
from tests.integration.source.test_source_reading import stream
from tests.kafka_utils import create_topic, unique

pytestmark = pytest.mark.integration

RECORDS = 30_000
#: Where reads start: the partition's start, middle and end.
STARTS = (0, RECORDS // 2, RECORDS - 500)


@pytest.fixture(scope="module")
def big_topic(kafka_bootstrap) -> str:
    """One partition of RECORDS single-record batches (one produce request each), values ``{"id": "b<offset>"}``."""
    topic = create_topic(kafka_bootstrap, unique("big"), 1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(topic, json.dumps({"id": f"b{i}", "key": "k", "amount": 1}).encode(), partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return topic


@pytest.mark.parametrize("reader", ["c", "python"])
def test_a_range_reads_from_start_middle_and_end(kafka_bootstrap, big_topic, reader):
    options = parse_source_options({"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": big_topic,
                                    "kafkaConsumer.nativeReader": str(reader == "c").lower()})
    for start in STARTS:
        began = time.monotonic()
        offsets = [o for batch in read_range(options, OffsetRange(big_topic, 0, start, start + 500))
                   for o in batch.column("offset").to_pylist()]
        assert offsets == list(range(start, start + 500)), f"read at {start}"
        assert time.monotonic() - began < 30, f"the read at {start} waited out most of its poll timeout"


@pytest.mark.parametrize("mode", ["executors", "driver", "auto"])
def test_a_query_starts_at_the_start_middle_and_end(spark, kafka_bootstrap, big_topic, tmp_path, mode):
    """The first batch of a query started at each place holds exactly the 500 records from there."""
    for start in STARTS:
        batches: list[list[int]] = []
        frame = stream(spark, kafka_bootstrap, subscribe=big_topic, readMode=mode, maxOffsetsPerTrigger="500",
                       startingOffsets=json.dumps({big_topic: {"0": start}}))
        query = (frame.writeStream.foreachBatch(lambda batch, _id, kept=batches: kept.append(
            sorted(r.offset for r in batch.select("offset").collect())))
                 .option("checkpointLocation", str(tmp_path / f"{mode}-{start}")).start())
        try:
            deadline = time.monotonic() + 90
            while not batches and query.exception() is None and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            query.stop()
        assert query.exception() is None, query.exception()
        assert batches and batches[0] == list(range(start, start + 500)), f"{mode} at {start}"


def test_the_example_pipeline_restored_from_a_savepoint_deep_in_the_partition_commits(
        kafka_bootstrap, big_topic, tmp_path, pipelines):  # noqa: F811 - the fixture
    """The soak's wedge: stop with a savepoint in the middle of the partition, restore it, restart. The
    restarted driver's first batch commits, starting exactly at the savepoint's offsets."""
    group = unique("big-group")
    start = RECORDS // 2
    first = Pipeline(tmp_path, kafka_bootstrap, big_topic, group, "--max-offsets-per-trigger", "500",
                     "--starting-offsets", json.dumps({big_topic: {"0": start}}), "--trigger-interval", "1 second")
    pipelines.append(first)
    first.wait_for(lambda: (first.status().get("last_batch_id") or -1) >= 1, "two batches")
    stopped = cli_subprocess("stop", "--job-home", first.home, "--savepoint", "--timeout", "120", "--json", timeout=150)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert first.wait_exit() == 0, first.log_tail()
    savepoint = json.loads(stopped.stdout)["savepoint"]
    at = savepoint["offsets"][big_topic]["0"]
    assert start + 1000 <= at < RECORDS

    restored = cli_subprocess("restore", "--job-home", first.home, "--savepoint", savepoint["id"], timeout=120)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    again = Pipeline(tmp_path, kafka_bootstrap, big_topic, group, "--max-offsets-per-trigger", "500",
                     "--trigger-interval", "1 second")
    pipelines.append(again)
    again.wait_for(lambda: (again.status().get("last_offsets") or {}).get(big_topic, {}).get("0", 0) > at,
                   "a batch after the savepoint", timeout=120)
    again.request_stop()
    assert again.wait_exit() == 0, again.log_tail()
    ids = [row["id"] for row in sink_rows(first.output)]
    assert len(ids) == len(set(ids)), "a record was written twice across the restore"
    offsets = sorted(int(i[1:]) for i in ids)
    assert offsets == list(range(start, offsets[-1] + 1)), "every record from the start, none skipped"
    assert offsets[-1] >= at
