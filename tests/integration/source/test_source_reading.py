"""The kafka_stream source against a real broker and real Spark: columns, start positions,
restarts, rate limits, new topics, data loss and bad options."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.kafka_utils import create_topic, delete_topic, produce, recreate_topic, unique

pytestmark = pytest.mark.integration


def stream(spark, bootstrap: str, **options: str):
    reader = spark.readStream.format("kafka_stream").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(spark, df, checkpoint: str):
    """Run to the end of the data present at start; return (rows sorted by partition/offset, query).

    foreachBatch (unlike the memory sink) can restart from a checkpoint.
    """
    collected: list = []
    query = (
        df.writeStream.foreachBatch(lambda batch, _batch_id: collected.extend(batch.collect()))
        .trigger(availableNow=True)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    query.awaitTermination(120)
    if query.exception() is not None:
        raise query.exception()
    return sorted(collected, key=lambda r: (r.topic, r.partition, r.offset)), query


def values(rows) -> list[tuple[int, bytes]]:
    return [(r.partition, r.value) for r in rows]


@pytest.fixture
def topic(kafka_bootstrap):
    """Two partitions: p0 holds a0..a4, p1 holds b0..b2."""
    name = create_topic(kafka_bootstrap, unique("src"), 2)
    produce(kafka_bootstrap, name, [(f"k{i}", f"a{i}") for i in range(5)], partition=0)
    produce(kafka_bootstrap, name, [(None, f"b{i}") for i in range(3)], partition=1)
    return name


def test_columns_types_and_headers(spark, kafka_bootstrap, tmp_path):
    name = create_topic(kafka_bootstrap, unique("cols"), 1)
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=1)
    produce(kafka_bootstrap, name, [(b"k", b"v")], partition=0, headers=[("h1", b"x"), ("h2", None)])
    produce(kafka_bootstrap, name, [(None, None)], partition=0)
    df = stream(spark, kafka_bootstrap, subscribe=name, startingOffsets="earliest", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows, _ = run_available_now(spark, df, str(tmp_path / "ckpt"))
    first, second = rows
    assert (first.key, first.value, first.topic, first.partition, first.offset) == (b"k", b"v", name, 0, 0)
    assert [(h.key, h.value) for h in first.headers] == [("h1", b"x"), ("h2", None)]
    assert first.timestampType == 0  # create time, as Spark's Kafka source reports it
    assert before <= first.timestamp <= dt.datetime.now(dt.UTC).replace(tzinfo=None)
    assert (second.key, second.value, second.offset, second.headers) == (None, None, 1, None)
    without = stream(spark, kafka_bootstrap, subscribe=name, startingOffsets="earliest")
    assert "headers" not in without.columns


@pytest.mark.parametrize(
    "options, expected",
    [
        pytest.param({"startingOffsets": "earliest"}, ["a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2"], id="earliest"),
        pytest.param(
            {"startingOffsets": '{"TOPIC": {"0": 3, "1": -2}}'}, ["a3", "a4", "b0", "b1", "b2"], id="json-per-partition"
        ),
        pytest.param({"startingOffsets": '{"TOPIC": {"0": -1, "1": 2}}'}, ["b2"], id="json-latest-and-offset"),
        pytest.param(
            {"assign": '{"TOPIC": [1]}', "startingOffsets": "earliest"}, ["b0", "b1", "b2"], id="assign-one-partition"
        ),
        pytest.param(
            {"startingOffsets": "earliest", "minPartitions": "5"},
            ["a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2"],
            id="split-ranges-read-exactly",
        ),
    ],
)
def test_start_positions(spark, kafka_bootstrap, topic, tmp_path, options, expected):
    options = {key: value.replace("TOPIC", topic) for key, value in options.items()}
    if "assign" not in options:
        options["subscribe"] = topic
    rows, query = run_available_now(spark, stream(spark, kafka_bootstrap, **options), str(tmp_path / "ckpt"))
    assert [r.value.decode() for r in rows] == expected
    # offsets/0 holds batch 0's end in Spark's Kafka shape: the next offset to read, never -1/-2.
    first_batch = (tmp_path / "ckpt" / "offsets" / "0").read_text().splitlines()
    assert first_batch[0] == "v1"
    expected_end = {"1": 3} if "assign" in options else {"0": 5, "1": 3}
    assert json.loads(first_batch[2]) == {topic: expected_end}


def _end_offsets(query) -> dict:
    import json

    ends = [p["sources"][0]["endOffset"] for p in query.recentProgress if p["sources"][0]["endOffset"]]
    return json.loads(ends[-1]) if isinstance(ends[-1], str) else ends[-1]


def test_latest_then_restart_reads_only_new_records(spark, kafka_bootstrap, topic, tmp_path):
    """latest resolves to the end offsets; the restart resumes there even though startingOffsets says earliest."""
    checkpoint = str(tmp_path / "ckpt")
    record = tmp_path / "start.json"
    fresh = stream(spark, kafka_bootstrap, subscribe=topic, startOffsetsPath=str(record))
    rows, query = run_available_now(spark, fresh, checkpoint)
    assert rows == []
    written = json.loads(record.read_text())
    assert (written["offsets"], written["starting"]) == ({topic: {"0": 5, "1": 3}}, "latest")
    record.unlink()
    produce(kafka_bootstrap, topic, [(None, "a5")], partition=0)
    produce(kafka_bootstrap, topic, [(None, "b3")], partition=1)
    restarted = stream(
        spark, kafka_bootstrap, subscribe=topic, startingOffsets="earliest", startOffsetsPath=str(record)
    )
    rows, query = run_available_now(spark, restarted, checkpoint)
    assert values(rows) == [(0, b"a5"), (1, b"b3")]
    assert not record.exists()  # a restart resolves no start position
    assert _end_offsets(query) == {topic: {"0": 6, "1": 4}}


def test_restart_from_checkpoint_ignores_start_options(spark, kafka_bootstrap, topic, tmp_path):
    checkpoint = str(tmp_path / "ckpt")
    rows, _ = run_available_now(
        spark, stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets="earliest"), checkpoint
    )
    assert len(rows) == 8
    produce(kafka_bootstrap, topic, [(None, "a5"), (None, "a6")], partition=0)
    changed = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 1, "1": 1}}}}')
    rows, _ = run_available_now(spark, changed, checkpoint)
    assert values(rows) == [(0, b"a5"), (0, b"a6")]


def test_starting_timestamps(spark, kafka_bootstrap, tmp_path):
    name = create_topic(kafka_bootstrap, unique("ts"), 2)
    produce(kafka_bootstrap, name, [(None, "old0"), (None, "old1")], partition=0)
    produce(kafka_bootstrap, name, [(None, "old-b")], partition=1)
    time.sleep(1.2)
    cut = int(time.time() * 1000)
    time.sleep(1.2)
    produce(kafka_bootstrap, name, [(None, "new0")], partition=0)
    produce(kafka_bootstrap, name, [(None, "new-b")], partition=1)
    rows, _ = run_available_now(
        spark, stream(spark, kafka_bootstrap, subscribe=name, startingTimestamp=str(cut)), str(tmp_path / "a")
    )
    assert values(rows) == [(0, b"new0"), (1, b"new-b")]
    per_partition = f'{{"{name}": {{"0": {cut}, "1": 0}}}}'
    rows, _ = run_available_now(
        spark,
        stream(spark, kafka_bootstrap, subscribe=name, startingOffsetsByTimestamp=per_partition),
        str(tmp_path / "b"),
    )
    assert values(rows) == [(0, b"new0"), (1, b"old-b"), (1, b"new-b")]


def test_starting_timestamp_after_last_record(spark, kafka_bootstrap, topic, tmp_path):
    future = str(int(time.time() * 1000) + 3_600_000)
    failing = stream(spark, kafka_bootstrap, subscribe=topic, startingTimestamp=future)
    with pytest.raises(Exception, match="no record at or after the starting timestamp"):
        run_available_now(spark, failing, str(tmp_path / "a"))
    at_end = stream(
        spark, kafka_bootstrap, subscribe=topic, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest"
    )
    rows, query = run_available_now(spark, at_end, str(tmp_path / "b"))
    assert rows == []


def test_group_offsets_with_fallback(spark, kafka_bootstrap, topic, tmp_path):
    group = unique("grp")
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[KafkaTopicPartition(topic, 0, 3)], asynchronous=False)
    consumer.close()
    earliest = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets="group", **{"kafka.group.id": group})
    rows, _ = run_available_now(spark, earliest, str(tmp_path / "a"))
    assert values(rows) == [(0, b"a3"), (0, b"a4"), (1, b"b0"), (1, b"b1"), (1, b"b2")]
    latest = stream(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets="group",
        groupId=group,
        startingOffsetsGroupFallback="latest",
    )
    rows, _ = run_available_now(spark, latest, str(tmp_path / "b"))
    assert values(rows) == [(0, b"a3"), (0, b"a4")]


def test_max_offsets_per_trigger_bounds_batches(spark, kafka_bootstrap, topic, tmp_path):
    df = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="3")
    rows, query = run_available_now(spark, df, str(tmp_path / "ckpt"))
    assert len(rows) == 8
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [3, 3, 2]
    import json

    first_end = query.recentProgress[0]["sources"][0]["endOffset"]
    first_end = json.loads(first_end) if isinstance(first_end, str) else first_end
    assert sum(first_end[topic].values()) == 3  # shared by backlog: 5 and 3 records -> 2 + 1


def test_subscribe_pattern_picks_up_new_topic(spark, kafka_bootstrap, tmp_path):
    prefix = unique("pat")
    first = create_topic(kafka_bootstrap, f"{prefix}-a", 1)
    produce(kafka_bootstrap, first, [(None, "a0")], partition=0)
    name = f"q_{uuid.uuid4().hex[:10]}"
    df = stream(spark, kafka_bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="500 milliseconds")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        _wait_for_rows(spark, name, 1)
        second = create_topic(kafka_bootstrap, f"{prefix}-b", 2)
        produce(kafka_bootstrap, second, [(None, "b0")], partition=1)
        produce(kafka_bootstrap, first, [(None, "a1")], partition=0)
        rows = _wait_for_rows(spark, name, 3)
    finally:
        query.stop()
    assert sorted((r.topic, r.partition, r.value) for r in rows) == [
        (first, 0, b"a0"),
        (first, 0, b"a1"),
        (second, 1, b"b0"),
    ]


def _wait_for_rows(spark, name: str, count: int, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = spark.sql(f"SELECT * FROM {name}").collect()
        if len(rows) >= count:
            return rows
        time.sleep(0.3)
    raise AssertionError(f"{name} has {len(rows)} rows after {timeout}s, expected {count}")


def test_offset_beyond_end_is_data_loss(spark, kafka_bootstrap, topic, tmp_path):
    beyond = f'{{"{topic}": {{"0": 50, "1": 0}}}}'
    failing = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets=beyond)
    with pytest.raises(Exception) as info:
        run_available_now(spark, failing, str(tmp_path / "a"))
    message = str(info.value)
    assert f"data loss on {topic}:0: the query needs offset 50 but Kafka holds [0, 5)" in message
    assert "failOnDataLoss=false" in message
    tolerant = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets=beyond, failOnDataLoss="false")
    rows, _ = run_available_now(spark, tolerant, str(tmp_path / "b"))
    assert [r.value for r in rows if r.partition == 0] == [b"a0", b"a1", b"a2", b"a3", b"a4"]


def test_recreated_topic(spark, kafka_bootstrap, tmp_path):
    """The checkpoint points past the end of a topic that was deleted and created again."""
    name = create_topic(kafka_bootstrap, unique("recreate"), 1)
    produce(kafka_bootstrap, name, [(None, f"old{i}") for i in range(4)], partition=0)
    strict, tolerant = str(tmp_path / "strict"), str(tmp_path / "tolerant")
    for checkpoint in (strict, tolerant):
        rows, _ = run_available_now(
            spark, stream(spark, kafka_bootstrap, subscribe=name, startingOffsets="earliest"), checkpoint
        )
        assert len(rows) == 4
    recreate_topic(kafka_bootstrap, name, ["new0", "new1"])
    with pytest.raises(Exception, match=f"data loss on {name}:0: the query needs offset 4 but Kafka holds \\[0, 2\\)"):
        run_available_now(spark, stream(spark, kafka_bootstrap, subscribe=name), strict)
    rows, _ = run_available_now(spark, stream(spark, kafka_bootstrap, subscribe=name, failOnDataLoss="false"), tolerant)
    assert [r.value for r in rows] == [b"new0", b"new1"]


@pytest.mark.parametrize(
    "options, message",
    [
        pytest.param(
            {"subscribe": "TOPIC", "assign": '{"TOPIC": [0]}'}, "exactly one of the options", id="subscribe-and-assign"
        ),
        pytest.param(
            {"subscribe": "TOPIC", "startingOffsets": '{"TOPIC": {"0": x}}'},
            "startingOffsets: offsets are not valid JSON",
            id="malformed-json",
        ),
        pytest.param(
            {"subscribe": "TOPIC", "startingOffsets": '{"TOPIC": {"0": -7, "1": 0}}'},
            "-2 \\(earliest\\), -1 \\(latest\\) or >= 0",
            id="negative-offset",
        ),
        pytest.param(
            {"subscribe": "TOPIC", "maxOffsetsPerTrigger": "-1"},
            "maxOffsetsPerTrigger must be a positive integer",
            id="bad-max-offsets",
        ),
        pytest.param(
            {"subscribe": "TOPIC", "startingTimestamp": "2024-05-01 10:00"},
            "epoch milliseconds",
            id="timestamp-without-zone",
        ),
        pytest.param(
            {"subscribe": "TOPIC", "kafka.bootstrap.servers": ""},
            "kafka.bootstrap.servers is required",
            id="no-bootstrap",
        ),
    ],
)
def test_bad_options_fail_when_defined(spark, kafka_bootstrap, topic, options, message):
    options = {key: value.replace("TOPIC", topic) for key, value in options.items()}
    with pytest.raises(Exception, match=message):
        stream(spark, kafka_bootstrap, **options)


@pytest.mark.parametrize(
    "options, message",
    [
        pytest.param({"subscribe": "MISSING"}, "topic\\(s\\) MISSING do not exist", id="unknown-topic"),
        pytest.param(
            {"startingOffsets": '{"TOPIC": {"0": 1}}'},
            "must give every partition the query reads: it lacks TOPIC:1",
            id="offsets-miss-partition",
        ),
        pytest.param(
            {"assign": '{"TOPIC": [7]}'}, "TOPIC:7 \\(topic has 2 partitions\\) do not exist", id="unknown-partition"
        ),
        pytest.param(
            {
                "kafka.sasl.mechanism": "NOPE",
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "startingOffsets": "earliest",
            },
            "NOPE",
            id="bad-kafka-option",
        ),
    ],
)
def test_bad_options_fail_before_any_batch(spark, kafka_bootstrap, topic, tmp_path, options, message):
    missing = unique("missing")
    options = {key: value.replace("MISSING", missing).replace("TOPIC", topic) for key, value in options.items()}
    if "assign" not in options and "subscribe" not in options:
        options["subscribe"] = topic
    message = message.replace("MISSING", missing).replace("TOPIC", topic)
    with pytest.raises(Exception, match=message):
        rows, query = run_available_now(spark, stream(spark, kafka_bootstrap, **options), str(tmp_path / "ckpt"))
    assert not (tmp_path / "ckpt" / "offsets" / "0").exists()


def test_deleted_topic(spark, kafka_bootstrap, tmp_path):
    """A subscribed topic deleted between runs is data loss; failOnDataLoss=false reads on without it."""
    kept = create_topic(kafka_bootstrap, unique("kept"), 1)
    doomed = create_topic(kafka_bootstrap, unique("doomed"), 1)
    produce(kafka_bootstrap, kept, [(None, "k0")], partition=0)
    produce(kafka_bootstrap, doomed, [(None, "d0")], partition=0)
    strict, tolerant = str(tmp_path / "strict"), str(tmp_path / "tolerant")
    both = f"{kept},{doomed}"
    for checkpoint in (strict, tolerant):
        rows, _ = run_available_now(
            spark, stream(spark, kafka_bootstrap, subscribe=both, startingOffsets="earliest"), checkpoint
        )
        assert len(rows) == 2
    delete_topic(kafka_bootstrap, doomed)
    produce(kafka_bootstrap, kept, [(None, "k1")], partition=0)
    with pytest.raises(Exception, match=f"data loss on {doomed}:0: .*the partition no longer exists"):
        run_available_now(spark, stream(spark, kafka_bootstrap, subscribe=both), strict)
    rows, query = run_available_now(
        spark, stream(spark, kafka_bootstrap, subscribe=both, failOnDataLoss="false"), tolerant
    )
    assert [(r.topic, r.value) for r in rows] == [(kept, b"k1")]
    assert _end_offsets(query) == {kept: {"0": 2}}


def test_a_local_session_reads_a_batch_in_at_most_a_task_per_core(spark, kafka_bootstrap, tmp_path):
    """register() hands a local session's cores to the source: a batch of 4 partitions runs in one wave
    of at most one task per core, every record once; minRecordsPerTask=1 keeps a task per partition."""
    from pyspark.sql import functions as F

    name = create_topic(kafka_bootstrap, unique("slots"), 4)
    for partition in range(4):
        produce(kafka_bootstrap, name, [(None, f"p{partition}-{i}") for i in range(30)], partition=partition)
    cores = spark.sparkContext.defaultParallelism

    def tasks_of_one_batch(min_records_per_task: str, checkpoint: str) -> tuple[int, list]:
        seen: list = []
        df = stream(spark, kafka_bootstrap, subscribe=name, startingOffsets="earliest", readMode="executors",
                    minRecordsPerTask=min_records_per_task)
        query = (df.withColumn("task", F.spark_partition_id()).writeStream
                 .foreachBatch(lambda batch, _id: seen.extend(batch.select("task", "partition", "offset").collect()))
                 .trigger(availableNow=True).option("checkpointLocation", checkpoint).start())
        query.awaitTermination(120)
        assert query.exception() is None
        return len({row.task for row in seen}), sorted((row.partition, row.offset) for row in seen)

    every_record = sorted((p, o) for p in range(4) for o in range(30))
    packed, rows = tasks_of_one_batch("10", str(tmp_path / "packed"))
    assert (packed, rows) == (min(4, cores), every_record)
    one_each, rows = tasks_of_one_batch("1", str(tmp_path / "one-each"))
    assert (one_each, rows) == (4, every_record)
