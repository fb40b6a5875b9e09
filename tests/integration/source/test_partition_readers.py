"""The two partition readers of the kafka_stream source (C into Arrow, and confluent-kafka in
Python) against a real broker: the same records, the same column values, the same range
edges, the same refusals."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from airflow_kafka_stream.errors import DataLossError, InvalidInputError, ReaderUnavailableError
from airflow_kafka_stream.source import arrow_rows, native_reader
from airflow_kafka_stream.source.native_reader import NativePartition
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.partition_polls import ConfluentPartition
from airflow_kafka_stream.source.source_options import parse_source_options
from tests.kafka_utils import create_topic, unique, watermarks

pytestmark = pytest.mark.integration

READERS = ["native", "python"]

#: (key, value, create time in ms): null keys, a tombstone, an empty value, bytes that are not text.
RECORDS = [
    (b"k0", b"v0", 1_700_000_000_000),
    (None, b"no key", 1_700_000_000_001),
    (b"k2", None, 1_700_000_000_002),
    (b"k3", b"", 1_700_000_000_003),
    (b"\x00\xff", b"\x00binary\xff" * 50, 1_700_000_000_004),
    ("ключ".encode(), "значение".encode(), 1_700_000_000_005),
] + [(b"k%d" % i, b"x" * (i % 7), 1_700_000_000_000 + i) for i in range(6, 40)]


@pytest.fixture(scope="module")
def topic(kafka_bootstrap) -> str:
    # The records are stamped in 2023: a topic keeping them only the default week would lose them to retention.
    name = create_topic(kafka_bootstrap, unique("readers"), 1, config={"retention.ms": "-1"})
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0})
    for key, value, stamp in RECORDS:
        producer.produce(name, value=value, key=key, partition=0, timestamp=stamp)
        producer.flush(30)
    return name


def options(bootstrap: str, topic: str, reader: str, **extra: str):
    given = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "kafkaConsumer.nativeReader": "false"}
    given["kafkaConsumer.nativeReader"] = "true" if reader == "native" else "false"
    given.update(extra)
    return parse_source_options(given)


def read(opts, topic: str, start: int, end: int) -> list[pa.RecordBatch]:
    return list(arrow_rows.read_range(opts, OffsetRange(topic, 0, start, end)))


def test_native_reader_is_built_and_chosen(kafka_bootstrap, topic):
    """The extension is optional at install time; in this project's environment it must be there."""
    assert native_reader.native_module() is not None, "the C reader did not build: see pip's output for gcc errors"
    schema = arrow_rows.arrow_schema(False)
    rng = OffsetRange(topic, 0, 0, 1)
    chosen = {
        "native": arrow_rows.open_partition(options(kafka_bootstrap, topic, "native"), rng, schema),
        "python": arrow_rows.open_partition(options(kafka_bootstrap, topic, "python"), rng, schema),
        "headers": arrow_rows.open_partition(
            options(kafka_bootstrap, topic, "native", includeHeaders="true"), rng, arrow_rows.arrow_schema(True)
        ),
    }
    try:
        assert isinstance(chosen["native"], NativePartition)
        assert isinstance(chosen["python"], ConfluentPartition)
        assert isinstance(chosen["headers"], ConfluentPartition)  # headers are read in Python only
    finally:
        for partition in chosen.values():
            partition.close()


READ_IN_A_NEW_PROCESS = """
import sys
from airflow_kafka_stream.source import arrow_rows
from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.source_options import parse_source_options
bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
rows = sum(b.num_rows for b in arrow_rows.read_range(opts, OffsetRange(topic, 0, 0, count)))
print(rows, "pandas" in sys.modules)
"""


def test_the_c_reader_never_makes_pyarrow_import_pandas(kafka_bootstrap, topic):
    """pyarrow imports pandas (about 0.2 s) the first time it converts Python values; the C reader builds every
    column from buffers, so a new process (an upgrade's source process, a new executor worker) does not pay it
    at its first read."""
    found = subprocess.run([sys.executable, "-c", READ_IN_A_NEW_PROCESS, kafka_bootstrap, topic, str(len(RECORDS))],
                           capture_output=True, text=True, timeout=60, check=True)
    assert found.stdout.split() == [str(len(RECORDS)), "False"], found.stdout + found.stderr


@pytest.mark.parametrize("reader", READERS)
def test_every_column_as_produced(kafka_bootstrap, topic, reader):
    table = pa.Table.from_batches(read(options(kafka_bootstrap, topic, reader), topic, 0, len(RECORDS)))
    assert table.schema == arrow_rows.arrow_schema(False)
    rows = table.to_pylist()
    assert [(r["key"], r["value"]) for r in rows] == [(k, v) for k, v, _ in RECORDS]
    assert [r["offset"] for r in rows] == list(range(len(RECORDS)))
    assert {(r["topic"], r["partition"], r["timestampType"]) for r in rows} == {(topic, 0, 0)}
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [stamp * 1000 for _, _, stamp in RECORDS]
    assert table.column("key").null_count == 1 and table.column("value").null_count == 1


def test_both_readers_give_identical_batches(kafka_bootstrap, topic):
    native = pa.Table.from_batches(read(options(kafka_bootstrap, topic, "native"), topic, 0, len(RECORDS)))
    python = pa.Table.from_batches(read(options(kafka_bootstrap, topic, "python"), topic, 0, len(RECORDS)))
    assert native.equals(python)


@pytest.mark.parametrize("reader", READERS)
def test_a_range_inside_the_partition_is_read_exactly(kafka_bootstrap, topic, reader):
    table = pa.Table.from_batches(read(options(kafka_bootstrap, topic, reader), topic, 3, 9))
    assert table.column("offset").to_pylist() == [3, 4, 5, 6, 7, 8]
    assert table.column("key").to_pylist() == [k for k, _, _ in RECORDS[3:9]]


def test_native_batches_stop_at_the_byte_limit(kafka_bootstrap, topic, monkeypatch):
    """Arrow's binary offsets are 32-bit: a batch ends before its values pass the limit, and the
    records that did not fit come with the next batch, none lost or repeated."""
    monkeypatch.setattr(native_reader, "MAX_BATCH_BYTES", 200)
    batches = read(options(kafka_bootstrap, topic, "native"), topic, 0, len(RECORDS))
    assert len(batches) > 2
    assert all(sum(len(v or b"") for v in b.column("value").to_pylist()) <= 200 or b.num_rows == 1 for b in batches)
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(len(RECORDS)))


@pytest.mark.parametrize("reader", READERS)
def test_partition_ending_before_the_planned_end(kafka_bootstrap, topic, reader):
    """The partition now ends short of the batch's planned end (a recreated or truncated topic)."""
    _low, high = watermarks(kafka_bootstrap, topic, 1)[0]
    with pytest.raises(DataLossError, match=rf"data loss on {topic}:0: the query needs offsets {high}\.\.{high + 4}"):
        read(options(kafka_bootstrap, topic, reader), topic, high - 2, high + 5)
    lenient = options(kafka_bootstrap, topic, reader, failOnDataLoss="false")
    table = pa.Table.from_batches(read(lenient, topic, high - 2, high + 5))
    assert table.column("offset").to_pylist() == [high - 2, high - 1]


@pytest.mark.parametrize("reader", READERS)
def test_option_the_client_refuses_is_named(kafka_bootstrap, topic, reader):
    opts = options(kafka_bootstrap, topic, reader, **{"kafka.fetch.wait.max.ms": "soon"})
    with pytest.raises(InvalidInputError, match=r"the Kafka client refused the kafka\.\* options: .*fetch\.wait\.max\.ms"):
        read(opts, topic, 0, 1)


def test_without_the_extension_a_task_fails_unless_the_fallback_is_allowed(kafka_bootstrap, topic, monkeypatch,
                                                                           caplog):
    """An executor without the C reader fails loudly by default; kafkaConsumer.allowPythonFallback reads in Python."""
    native_reader._bind.cache_clear()
    monkeypatch.setattr(native_reader, "librdkafka_path", lambda: None)
    try:
        with caplog.at_level(logging.WARNING, logger=native_reader.__name__):
            assert native_reader.native_module() is None
        assert "C reader unavailable: librdkafka was found neither" in caplog.text
        schema, rng = arrow_rows.arrow_schema(False), OffsetRange(topic, 0, 0, 1)
        with pytest.raises(ReaderUnavailableError, match=r"C reader is unavailable on this executor .*librdkafka "
                                                         r"was found neither.*kafkaConsumer\.allowPythonFallback=true"):
            arrow_rows.open_partition(options(kafka_bootstrap, topic, "native"), rng, schema)
        allowed = options(kafka_bootstrap, topic, "native", **{"kafkaConsumer.allowPythonFallback": "true"})
        partition = arrow_rows.open_partition(allowed, rng, schema)
        partition.close()
        assert isinstance(partition, ConfluentPartition)
    finally:
        native_reader._bind.cache_clear()


def test_closed_native_reader_refuses_reads(kafka_bootstrap, topic):
    module = native_reader.native_module()
    config = native_reader.librdkafka_config(arrow_rows.consumer_config(options(kafka_bootstrap, topic, "native")))
    reader = module.PartitionReader(config, topic, 0, 0)
    reader.close()
    reader.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        reader.read(10, 100, 10, 1000)
    with pytest.raises(ValueError, match="max_bytes"):
        module.PartitionReader(config, topic, 0, 0).read(10, 100, 10, 2**31)


def test_native_reader_refuses_unsafe_calls(kafka_bootstrap, topic):
    """librdkafka runs without the GIL: a second call on the same reader, or an oversized read, is refused."""
    module = native_reader.native_module()
    config = native_reader.librdkafka_config(arrow_rows.consumer_config(options(kafka_bootstrap, topic, "native")))
    end = len(RECORDS)
    reader = module.PartitionReader(config, topic, 0, end)  # at the end: a read waits for its timeout
    results: list = []
    waiting = threading.Thread(target=lambda: results.append(reader.read(10, 1500, end + 10, 1000)))
    waiting.start()
    time.sleep(0.3)
    try:
        with pytest.raises(RuntimeError, match="in use by another thread"):
            reader.close()
        with pytest.raises(RuntimeError, match="in use by another thread"):
            reader.watermarks(1000)
    finally:
        waiting.join(10)
    assert results and results[0][0] == 0  # the waiting read ended normally, with no records
    with pytest.raises(ValueError, match="max_messages"):
        reader.read(2**21, 100, end + 10, 1000)
    reader.close()
