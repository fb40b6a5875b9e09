"""The kafka_stream source over real Kafka's offset gaps: transaction markers, read by real Spark.

A transactional topic's offsets are not all records: each commit or abort
leaves a marker in every partition the transaction touched. A source that
plans batches by offsets (``maxOffsetsPerTrigger=3`` here) ends batches on
markers, plans batches that hold only markers, and must stop at the high
watermark (the offset after the last marker) without waiting for a record
that cannot come. Each read mode reads the topic from earliest to the end:
every record exactly once, the checkpoint at the watermarks, the query ended.

The cluster is the test broker (Apache Kafka, or KAFKA_BOOTSTRAP_SERVERS), so
``read_committed`` filters aborted records as users' clusters do.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.offsets import TopicPartition
from tests.integration.source.test_source_reading import stream
from tests.kafka_transactions import End, Send, TransactionalTopic, new_topic, play, transaction

pytestmark = pytest.mark.integration

#: A read that got no record for this long fails its task: a wedged read fails the test instead of hanging it.
POLL_TIMEOUT_MS = "20000"
#: How long a whole availableNow query over the topic may take (it takes seconds; generous for a loaded machine).
QUERY_DEADLINE_S = 150.0
#: No batch of a few records takes this long unless its read waited out a timeout (half of POLL_TIMEOUT_MS, so a
#: read that gave up at the poll timeout and called its range done would be caught too).
SLOW_BATCH_MS = 10_000


def script() -> list[Send | End]:
    """Committed and aborted transactions over 4 partitions, one and several records, two producers interleaved.

    Layout (C commit marker, A abort marker, x aborted record):
      p0: a0 a1 C x0 A a2 C a3 C            high 9
      p1: b0 C x1 x2 x3 A b1 b2 C           high 9
      p2: y0 y1 A c0 C c1 z0 C A            high 9 (two markers in a row: producers P and Q interleaved)
      p3: d0 C d1 C d2 d3 d4 C x4 A         high 10 (ends on an abort marker)
    """
    return [
        *transaction("P", {0: ["a0", "a1"], 1: ["b0"]}, commit=True),
        *transaction("P", {0: ["x0"], 2: ["y0", "y1"]}, commit=False),
        *transaction("P", {0: ["a2"], 2: ["c0"]}, commit=True),
        *transaction("P", {1: ["x1", "x2", "x3"]}, commit=False),
        *transaction("P", {1: ["b1", "b2"], 3: ["d0"]}, commit=True),
        Send("P", 2, "c1"), Send("Q", 2, "z0"), Send("P", 3, "d1"), End("P", commit=True), End("Q", commit=False),
        *transaction("P", {3: ["d2", "d3", "d4"]}, commit=True),
        *transaction("P", {3: ["x4"]}, commit=False),
        *transaction("P", {0: ["a3"]}, commit=True),
    ]


@pytest.fixture(scope="module")
def topic(transactional_cluster) -> TransactionalTopic:
    topic = play(new_topic(transactional_cluster, "txn-read"), script())
    assert topic.high == {0: 9, 1: 9, 2: 9, 3: 10}
    assert topic.markers == {0: [2, 4, 6, 8], 1: [1, 5, 8], 2: [2, 4, 7, 8], 3: [1, 3, 7, 9]}
    assert sum(not r.committed for r in topic.records) == 8
    return topic


def planned_offsets(checkpoint: Path) -> dict[int, dict[int, int]]:
    """Every planned batch's end offsets (the source's line of ``offsets/N``), per partition."""
    found = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit():
            line = json.loads(path.read_text().splitlines()[2])
            found[int(path.name)] = {int(p): o for offsets in line.values() for p, o in offsets.items()}
    return found


def run_within_deadline(writer, checkpoint: str):
    """Run ``writer`` with availableNow on ``checkpoint``; fail when it fails or still runs at QUERY_DEADLINE_S
    (it is stopped then: a read that waits for a record a marker holds would never end)."""
    query = writer.trigger(availableNow=True).option("checkpointLocation", checkpoint).start()
    try:
        ended = query.awaitTermination(QUERY_DEADLINE_S)
    finally:
        if query.isActive:
            query.stop()
    assert ended, f"the query did not end within {QUERY_DEADLINE_S}s: a read waits for a record that cannot come?"
    if query.exception() is not None:
        raise query.exception()
    return query


def read_to_end(spark, topic: TransactionalTopic, checkpoint: Path, **options: str):
    """Read ``topic`` (or its ``assign``-ed partitions) from earliest with availableNow, by default in batches of at
    most 3 offsets.

    Returns the (partition, offset, value) of every row in the order read, the rows per batch, and the slowest
    batch's milliseconds. Fails when the query fails, or is still running at the deadline (it is stopped then).
    """
    settings = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "3",
                "kafkaConsumer.pollTimeoutMs": POLL_TIMEOUT_MS, **options}
    if "assign" not in settings:
        settings["subscribe"] = topic.name
    df = stream(spark, topic.cluster.bootstrap, **settings)
    batches: dict[int, list[tuple[int, int, bytes]]] = {}

    def keep(batch, batch_id: int) -> None:
        batches[batch_id] = [(r.partition, r.offset, r.value) for r in batch.select("partition", "offset",
                                                                                    "value").collect()]

    query = run_within_deadline(df.writeStream.foreachBatch(keep), str(checkpoint))
    rows = [row for _, rows in sorted(batches.items()) for row in rows]
    slowest = max((p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress), default=0)
    return rows, batches, slowest


def assert_batches_hold_their_ranges(topic: TransactionalTopic, planned: dict[int, dict[int, int]],
                                     batches: dict[int, list[tuple[int, int, bytes]]], read_committed: bool,
                                     per_batch: int) -> None:
    """Each batch holds exactly the records of its planned offset ranges (from the previous batch's ends)."""
    assert sorted(batches) == sorted(planned)
    expected = topic.expected(read_committed)
    for n, ends in sorted(planned.items()):
        starts = planned.get(n - 1, {})
        assert sum(end - starts.get(p, 0) for p, end in ends.items()) <= per_batch, f"batch {n} exceeds the limit"
        wanted = [row for row in expected if starts.get(row[0], 0) <= row[1] < ends.get(row[0], 0)]
        assert sorted(batches[n]) == wanted, f"batch {n}: {starts} -> {ends}"


READS = {
    "executors": {"readMode": "executors"},
    "driver": {"readMode": "driver"},
    "default": {},
    "read_committed": {"kafka.isolation.level": "read_committed"},
    "read_committed_driver": {"kafka.isolation.level": "read_committed", "readMode": "driver"},
    "python_reader": {"kafkaConsumer.nativeReader": "false"},
    "python_reader_driver": {"kafkaConsumer.nativeReader": "false", "readMode": "driver"},
}


@pytest.mark.parametrize("read", sorted(READS))
def test_every_record_once_and_the_checkpoint_at_the_watermarks(spark, topic, tmp_path, read):
    options = READS[read]
    checkpoint = tmp_path / "ckpt"
    rows, batches, slowest_ms = read_to_end(spark, topic, checkpoint, **options)

    read_committed = options.get("kafka.isolation.level") == "read_committed"
    assert sorted(rows) == topic.expected(read_committed), "every record exactly once, at its offset"
    assert len(rows) == len(set(rows))

    position = read_position(str(checkpoint))
    assert position.in_flight_batch_id is None
    assert position.source_offsets(0) == {TopicPartition(topic.name, p): o for p, o in topic.high.items()}, (
        "the last committed offsets are the high watermarks, past the last marker")

    planned = planned_offsets(checkpoint)
    assert_batches_hold_their_ranges(topic, planned, batches, read_committed, per_batch=3)
    # The test covers what it means to: batches start on markers, and some batch holds nothing but markers.
    starts_on_marker = {(p, o) for ends in planned.values() for p, o in ends.items() if topic.is_marker(p, o)}
    assert starts_on_marker, "some batch starts at a marker"
    assert any(not rows for rows in batches.values()), "some batch holds only markers"
    assert slowest_ms < SLOW_BATCH_MS, "a batch waited (for a record a marker holds?)"


@pytest.mark.parametrize("read", ["executors", "driver", "python_reader"])
def test_one_offset_per_batch_through_a_run_of_markers(spark, topic, tmp_path, read):
    """Partition 2 ends in two markers in a row, partition 3 in a record and a marker: with one offset per batch,
    every marker is a batch of its own, including the last ones before the high watermark."""
    checkpoint = tmp_path / "ckpt"
    rows, batches, slowest_ms = read_to_end(spark, topic, checkpoint, assign=json.dumps({topic.name: [2, 3]}),
                                            maxOffsetsPerTrigger="1", **READS[read])
    assert slowest_ms < SLOW_BATCH_MS
    wanted = [row for row in topic.expected() if row[0] in (2, 3)]
    assert sorted(rows) == wanted
    planned = planned_offsets(checkpoint)
    assert_batches_hold_their_ranges(topic, planned, batches, read_committed=False, per_batch=1)
    assert len(planned) == topic.high[2] + topic.high[3], "one batch per offset, markers included"
    assert sum(not rows for rows in batches.values()) == len(topic.markers[2]) + len(topic.markers[3])
    assert read_position(str(checkpoint)).source_offsets(0) == {TopicPartition(topic.name, p): topic.high[p]
                                                                for p in (2, 3)}
