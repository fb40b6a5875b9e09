"""readMode=driver against a real broker and real Spark: the same batches as the executors' reads,
replays of a planned batch after a restart (in a task, through readBetweenOffsets), switching modes
on one checkpoint, and data loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.source.test_source_reading import run_available_now, stream
from tests.kafka_utils import create_topic, produce, recreate_topic, unique

pytestmark = pytest.mark.integration

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def rows_of(rows) -> list[tuple]:
    return [tuple(row.asDict().get(name) for name in COLUMNS) for row in rows]


def offsets_lines(checkpoint: Path) -> dict[int, str]:
    """The source's line of every planned batch, as Spark stored it."""
    found = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit():
            found[int(path.name)] = path.read_text().splitlines()[2]
    return found


def run_batches(spark, df, checkpoint: Path) -> tuple[dict[int, list[tuple]], object]:
    """Run availableNow; the rows of each batch by batch id (a replayed batch keeps its id)."""
    batches: dict[int, list[tuple]] = {}

    def keep(batch, batch_id):
        batches[batch_id] = sorted(rows_of(batch.collect()), key=lambda r: (r[3], r[4]))

    return batches, run_to_end(df.writeStream.foreachBatch(keep), checkpoint)


def run_to_end(writer, checkpoint: Path):
    """Start ``writer`` on ``checkpoint`` with the availableNow trigger, wait for it, raise what it raised."""
    query = writer.trigger(availableNow=True).option("checkpointLocation", str(checkpoint)).start()
    query.awaitTermination(120)
    if query.exception() is not None:
        raise query.exception()
    return query


def forget_commit(checkpoint: Path, batch_id: int) -> None:
    """As if the driver died after planning ``batch_id`` and before committing it."""
    (checkpoint / "commits" / str(batch_id)).unlink()
    (checkpoint / "commits" / f".{batch_id}.crc").unlink(missing_ok=True)


@pytest.fixture
def topic(kafka_bootstrap):
    """Two partitions: p0 holds a0..a4 (with a header on a0), p1 holds b0..b2."""
    name = create_topic(kafka_bootstrap, unique("drv"), 2)
    produce(kafka_bootstrap, name, [("k0", "a0")], partition=0, headers=[("h", b"v")])
    produce(kafka_bootstrap, name, [(f"k{i}", f"a{i}") for i in range(1, 5)], partition=0)
    produce(kafka_bootstrap, name, [(None, f"b{i}") for i in range(3)], partition=1)
    return name


def source(spark, bootstrap: str, topic: str, mode: str, **options: str):
    """Batches of at most 3 records; without includeHeaders the C reader reads them."""
    return stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="3",
                  readMode=mode, **options)


def test_driver_reads_the_batches_and_offsets_the_executors_read(spark, kafka_bootstrap, topic, tmp_path):
    found = {}
    for mode in ("executors", "driver"):
        df = source(spark, kafka_bootstrap, topic, mode, includeHeaders="true")
        batches, query = run_batches(spark, df, tmp_path / mode)
        found[mode] = (batches, offsets_lines(tmp_path / mode), query.recentProgress)
    executors, driver = found["executors"], found["driver"]
    assert [len(rows) for _, rows in sorted(driver[0].items())] == [3, 3, 2]
    assert driver[0] == executors[0]  # every column of every record, batch by batch
    assert driver[0][0][0][:2] == (b"k0", b"a0") and driver[0][0][0][7] == [("h", b"v")]
    assert driver[1] == executors[1]  # the offsets text Spark stored, byte for byte (compact JSON)
    assert driver[1][0] == f'{{"{topic}":{{"0":2,"1":1}}}}'
    # PySpark's driver-side reader reports no latest offset; the executors' reader reports the watermarks.
    assert all(p["sources"][0]["latestOffset"] in (None, "null") for p in driver[2] if p["numInputRows"])
    assert all(p["sources"][0]["latestOffset"] for p in executors[2] if p["numInputRows"])


def test_a_planned_batch_is_read_again_exactly_and_modes_switch_on_one_checkpoint(
    spark, kafka_bootstrap, topic, tmp_path
):
    checkpoint = tmp_path / "ckpt"
    first, _ = run_batches(spark, source(spark, kafka_bootstrap, topic, "executors"), checkpoint)
    assert sorted(first) == [0, 1, 2]
    forget_commit(checkpoint, 2)
    produce(kafka_bootstrap, topic, [(None, "a5")], partition=0)

    # The driver has nothing of batch 2 in memory: a task reads it again through readBetweenOffsets.
    again, _ = run_batches(spark, source(spark, kafka_bootstrap, topic, "driver"), checkpoint)
    assert again[2] == first[2]
    assert [r[1] for r in again[3]] == [b"a5"]  # read on the driver
    assert sorted(again) == [2, 3]

    forget_commit(checkpoint, 3)
    produce(kafka_bootstrap, topic, [(None, "b3")], partition=1)
    back, _ = run_batches(spark, source(spark, kafka_bootstrap, topic, "executors"), checkpoint)
    assert back[3] == again[3]
    assert [r[1] for r in back[4]] == [b"b3"]
    lines = offsets_lines(checkpoint)
    assert lines[4] == f'{{"{topic}":{{"0":6,"1":4}}}}'


def test_data_loss_is_found_when_the_driver_plans(spark, kafka_bootstrap, tmp_path):
    name = create_topic(kafka_bootstrap, unique("drv-loss"), 1)
    produce(kafka_bootstrap, name, [(None, f"old{i}") for i in range(4)], partition=0)
    strict, tolerant = tmp_path / "strict", tmp_path / "tolerant"
    for checkpoint in (strict, tolerant):
        batches, _ = run_batches(spark, source(spark, kafka_bootstrap, name, "driver"), checkpoint)
        assert sum(len(rows) for rows in batches.values()) == 4
    recreate_topic(kafka_bootstrap, name, ["new0", "new1"])
    with pytest.raises(Exception, match=f"data loss on {name}:0: the query needs offset 4 but Kafka holds \\[0, 2\\)"):
        run_batches(spark, source(spark, kafka_bootstrap, name, "driver"), strict)
    assert sorted(offsets_lines(strict)) == [0, 1], "the refused batch must not be planned"
    batches, _ = run_batches(spark, source(spark, kafka_bootstrap, name, "driver", failOnDataLoss="false"), tolerant)
    assert [r[1] for rows in batches.values() for r in rows] == [b"new0", b"new1"]


def test_a_driver_read_without_a_bound_is_refused_before_any_batch(spark, kafka_bootstrap, topic, tmp_path):
    with pytest.raises(Exception, match="readMode=driver reads every batch into the driver's memory"):
        run_available_now(spark, stream(spark, kafka_bootstrap, subscribe=topic, readMode="driver"),
                          str(tmp_path / "ckpt"))
    assert not (tmp_path / "ckpt" / "offsets" / "0").exists()


def test_a_query_with_a_driver_read_and_an_executor_read_source(spark, kafka_bootstrap, topic, tmp_path):
    """Each source of a query is its own reader: one may read on the driver, the other in tasks."""
    other = create_topic(kafka_bootstrap, unique("drv-other"), 1)
    produce(kafka_bootstrap, other, [(None, f"c{i}") for i in range(4)], partition=0)
    both = source(spark, kafka_bootstrap, topic, "driver").union(source(spark, kafka_bootstrap, other, "executors"))
    checkpoint = tmp_path / "ckpt"
    batches, _ = run_batches(spark, both, checkpoint)
    values = sorted(r[1] for rows in batches.values() for r in rows)
    assert values == sorted([f"a{i}".encode() for i in range(5)] + [f"b{i}".encode() for i in range(3)]
                            + [f"c{i}".encode() for i in range(4)])
    last = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    lines = (checkpoint / "offsets" / str(last)).read_text().splitlines()[2:]
    assert lines == [f'{{"{topic}":{{"0":5,"1":3}}}}', f'{{"{other}":{{"0":4}}}}']


def test_the_driver_lets_go_of_each_batch_once_spark_takes_it(kafka_bootstrap, topic):
    """The driver holds a batch it read only until Spark takes its records; a batch planned and never run
    (a stopped query) goes at the next commit, and never more than MAX_PREFETCHED are held."""
    from airflow_kafka_stream.source.offsets_text import OffsetsJson
    from airflow_kafka_stream.source.source import KafkaStreamDataSource

    reader = KafkaStreamDataSource({"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic,
                                    "startingOffsets": "earliest", "maxOffsetsPerTrigger": "2"}).streamReader(None)
    as_spark = lambda offsets: OffsetsJson.loads(OffsetsJson.dumps(offsets))  # noqa: E731 - as the JVM hands it back
    try:
        planned_and_taken(reader, kafka_bootstrap, topic, as_spark)
    finally:
        reader.stop()  # the driver's kept consumers go with the reader
        assert not reader._consumers._kept


def planned_and_taken(reader, kafka_bootstrap: str, topic: str, as_spark) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from airflow_kafka_stream.source.driver_reader import MAX_PREFETCHED

    start = as_spark(reader.initialOffset())
    read = 0
    for _ in range(3):
        end = as_spark(reader.latestOffset(start, ReadMaxRows(2)))
        assert len(reader.partitions(start, end)) == 1  # read on the driver: one partition, held by Spark
        read += sum(batch.num_rows for batch in reader.getCache(start, end))
        assert reader._prefetched == [], "Spark holds the records now: the driver must let go of them"
        reader.commit(end)
        start = end
    assert read == 6
    produce(kafka_bootstrap, topic, [(None, "c0")], partition=1)  # 3 records left: 3 batches of 1
    planned = [start]
    for _ in range(MAX_PREFETCHED + 1):  # planned, never run: the query stopped
        planned.append(as_spark(reader.latestOffset(planned[-1], ReadMaxRows(1))))
    start = planned[-1]
    assert len(reader._prefetched) == MAX_PREFETCHED
    assert reader.getCache(planned[0], planned[1]) is None, "the oldest goes; tasks would read it"
    assert reader.getCache(planned[1], planned[2]) is not None
    reader.commit(planned[2])
    assert [e.end for e in reader._prefetched] == [planned[3]]
    assert reader.latestOffset(start, ReadMaxRows(2)) is start  # nothing new: Spark's own object back


def test_readmode_auto_reads_small_batches_on_the_driver_and_large_ones_in_tasks(spark, kafka_bootstrap, tmp_path):
    """Without readMode, the batch's planned size decides: a large batch (a catch-up) in Spark tasks, one
    per Kafka partition here, the small batches of a job that keeps up on the driver (one partition of
    records Spark took from the driver), and a batch that outgrows the byte budget while read in tasks.
    Every batch holds the same records wherever it was read."""
    name = create_topic(kafka_bootstrap, unique("drv-auto"), 2)
    for partition in (0, 1):
        produce(kafka_bootstrap, name, [(None, f"old{partition}-{i}") for i in range(4)], partition=partition)
    seen: list[tuple[int, list]] = []

    def keep(batch, _batch_id):
        rows = sorted((r.partition, r.offset, r.value) for r in batch.collect())
        seen.append((batch.rdd.getNumPartitions(), rows))

    def run(checkpoint: Path, **options: str) -> None:
        df = stream(spark, kafka_bootstrap, subscribe=name, startingOffsets="earliest", minRecordsPerTask="1",
                    driverReadMaxRecords="5", **options)
        run_to_end(df.writeStream.foreachBatch(keep), checkpoint)

    run(tmp_path / "auto")
    assert seen == [(2, [(p, o, f"old{p}-{o}".encode()) for p in (0, 1) for o in range(4)])]
    produce(kafka_bootstrap, name, [(None, "new0")], partition=0)
    produce(kafka_bootstrap, name, [(None, "new1")], partition=1)
    run(tmp_path / "auto")
    assert seen[1] == (1, [(0, 4, b"new0"), (1, 4, b"new1")])
    produce(kafka_bootstrap, name, [(None, "big0")], partition=0)
    produce(kafka_bootstrap, name, [(None, "big1")], partition=1)
    run(tmp_path / "auto", driverReadMaxBytes="1")
    assert seen[2] == (2, [(0, 5, b"big0"), (1, 5, b"big1")])


def test_a_stateful_query_reading_on_the_driver_replays_into_its_state_exactly(spark, kafka_bootstrap, topic, tmp_path):
    """A count per partition, kept in Spark's state store: a batch replayed after a restart (read in a
    task) updates the state restored for it, so the counts stay exact."""
    checkpoint = tmp_path / "ckpt"
    counts: dict[int, int] = {}

    def run() -> None:
        frame = source(spark, kafka_bootstrap, topic, "driver").groupBy("partition").count()
        run_to_end(frame.writeStream.outputMode("update").foreachBatch(
            lambda batch, _id: counts.update({r.partition: r["count"] for r in batch.collect()})), checkpoint)

    run()
    assert counts == {0: 5, 1: 3}
    forget_commit(checkpoint, 2)
    produce(kafka_bootstrap, topic, [(None, "a5")], partition=0)
    counts.clear()
    run()
    assert counts == {0: 6, 1: 3}  # batch 2 (a4, b2) once more, then a5: no record counted twice
