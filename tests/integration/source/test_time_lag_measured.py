"""Time lag per partition, measured for real: a job that starts 90 s behind reports about 90 s per partition,
falls to 0 when it has caught up and stays 0 while nothing new arrives (an idle job has no lag, however long
ago the last record came); verify measures the same from the checkpoint; the Kafka read takes the first
record at or after an offset that holds a transaction marker. Real broker, real Spark (markers: the mock
cluster, as in test_transaction_markers.py).

Named apart from tests/unit/core/test_time_lag.py: the test directories are no packages, so basenames must differ."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.kafka.record_times import RecordTimes, record_timestamps
from airflow_kafka_stream.ops.context import build_context
from airflow_kafka_stream.ops.inspect import job_status
from airflow_kafka_stream.ops.verify import verify
from airflow_kafka_stream.render.checkpoint import verify_text
from airflow_kafka_stream.render.job import status_text
from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.status import read_status
from tests.kafka_transactions import new_topic, play, transaction
from tests.kafka_utils import create_topic, unique

pytestmark = pytest.mark.integration

BEHIND_SECONDS = 90
PER_PARTITION = 12


def produce_at(bootstrap: str, topic: str, partition: int, count: int, timestamp_ms: int) -> None:
    """``count`` records stamped ``timestamp_ms`` (CreateTime)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    errors: list = []
    for i in range(count):
        producer.produce(topic, value=f"v{i}", partition=partition, timestamp=timestamp_ms,
                         on_delivery=lambda err, _msg: err and errors.append(err))
        producer.flush(10)
    assert not errors, errors


def timestamps_of(bootstrap: str, topic: str, partition: int) -> dict[int, int]:
    """offset -> record timestamp of every record of a partition (markers are no records)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("times"), "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([KafkaTopicPartition(topic, partition, 0)])
    found: dict[int, int] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                break  # the partition's end
            found[msg.offset()] = msg.timestamp()[1]
    finally:
        consumer.close()
    return found


def test_a_job_starting_90s_behind_reports_it_falls_to_zero_and_stays_there(spark, kafka_bootstrap, tmp_path: Path):
    topic = create_topic(kafka_bootstrap, unique("time-lag"), 2)
    produced_at = time.time()
    stamp = int(produced_at * 1000) - BEHIND_SECONDS * 1000
    for partition in (0, 1):
        produce_at(kafka_bootstrap, topic, partition, PER_PARTITION, stamp)
    home = str(tmp_path / "home")
    config = StreamConfig(job_name="time-lag", bootstrap_servers=kafka_bootstrap, group_id=unique("time-lag-group"),
                          topics=[topic], starting_offsets="earliest", heartbeat_seconds=1.0,
                          max_offsets_per_trigger=4)
    runtime = StreamRuntime(spark, home, config)

    def slowly(batch_df, _batch_id):
        batch_df.count()
        time.sleep(1.0)  # a few measurements while the job catches up

    writer = runtime.read_stream().writeStream.foreachBatch(slowly).trigger(processingTime="200 milliseconds")
    results: list = []
    thread = threading.Thread(target=lambda: results.append(runtime.run(writer)), daemon=True)
    thread.start()
    measured: dict[str, dict] = {}  # measured_at -> time_lag, in the order seen
    caught_up_at = None
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            lag = (read_status(home) or {}).get("time_lag")
            if lag and lag["measured_at"] not in measured:
                measured[lag["measured_at"]] = lag
                if lag["max_seconds"] == 0 and caught_up_at is None:
                    caught_up_at = time.monotonic()
            if caught_up_at is not None and time.monotonic() - caught_up_at > 4:
                break  # four more heartbeat intervals with nothing new
            time.sleep(0.2)
        status = job_status(JobHome(home))
    finally:
        JobHome(home).request_stop("test")
        thread.join(90)
    assert results and results[0].state == "STOPPED", results
    looks = list(measured.values())
    assert caught_up_at is not None, f"the time lag never fell to 0: {looks}"

    first = looks[0]
    assert set(first["partitions"][topic]) == {"0", "1"}
    for partition, seconds in first["partitions"][topic].items():
        # Every waiting record is stamped 90 s before it was produced; the look came some seconds later.
        assert BEHIND_SECONDS - 1 <= seconds <= BEHIND_SECONDS + (time.time() - produced_at), (partition, looks)
    zero = next(index for index, look in enumerate(looks) if look["max_seconds"] == 0)
    assert zero >= 1, "it was behind before it caught up"
    after = looks[zero:]
    assert len(after) >= 3, f"measured on while idle: {after}"
    assert all(look["max_seconds"] == 0 and set(look["partitions"][topic].values()) == {0.0} for look in after), (
        "caught up and nothing new: 0, not the time since the last record")
    # The batches held records stamped 90 s ago: each committed about 90 s after its newest record.
    assert BEHIND_SECONDS - 1 <= after[-1]["last_batch_delay_seconds"] <= BEHIND_SECONDS + 120

    samples = read_status(home)["time_lag_samples"]
    assert samples[0][1] >= BEHIND_SECONDS - 1 and samples[-1][1] == 0
    assert status.time_lag is not None and status.time_lag.max_seconds == 0
    assert "time lag        max 0.0 s" in status_text(status)
    assert status.to_dict()["time_lag"]["partitions"] == {topic: {"0": 0.0, "1": 0.0}}

    # Verify, with no driver: more records stamped 90 s ago in partition 0; partition 1 stays caught up.
    produce_at(kafka_bootstrap, topic, 0, 3, int(time.time() * 1000) - BEHIND_SECONDS * 1000)
    result = verify(build_context(job_home=home, client_config={"bootstrap.servers": kafka_bootstrap}))
    seconds = result.time_lag_seconds
    assert seconds is not None, verify_text(result)
    assert BEHIND_SECONDS - 1 <= seconds[TopicPartition(topic, 0)] <= BEHIND_SECONDS + 30
    assert seconds[TopicPartition(topic, 1)] == 0.0
    text = verify_text(result)
    assert "TIME LAG" in text.splitlines()[0], text
    rows = {row["partition"]: row for row in result.to_dict()["partitions"]}
    assert rows[0]["lag"] == 3 and rows[0]["time_lag_seconds"] >= BEHIND_SECONDS - 1


def test_the_record_at_a_marker_is_the_first_record_after_it(transactional_cluster):
    """p0: a0 C a1 C (offsets 0..3, high 4); p1: b0 b1 C (high 3)."""
    topic = play(new_topic(transactional_cluster, "time-lag-txn"), [
        *transaction("P", {0: ["a0"], 1: ["b0", "b1"]}, commit=True),
        *transaction("P", {0: ["a1"]}, commit=True),
    ])
    assert topic.markers[0] == [1, 3] and topic.high[0] == 4 and topic.high[1] == 3
    p0, p1 = TopicPartition(topic.name, 0), TopicPartition(topic.name, 1)
    stamps = timestamps_of(transactional_cluster.bootstrap, topic.name, 0)
    stamps1 = timestamps_of(transactional_cluster.bootstrap, topic.name, 1)
    assert sorted(stamps) == [0, 2]
    config = {"bootstrap.servers": transactional_cluster.bootstrap}

    found = record_timestamps(config, {p0: 1, p1: 0})
    assert found == {p0: stamps[2], p1: stamps1[0]}, "at the commit marker: the record after it"
    assert record_timestamps(config, {p0: 3, p1: 3}) == {p0: None, p1: None}, (
        "only a marker, or nothing, left: no record, nothing waits")

    times = RecordTimes(config)
    try:
        # A batch's newest record: the last record of its range, though the range ends on a marker.
        assert times.newest_before({p0: (0, 4), p1: (0, 3)}) == {p0: stamps[2], p1: stamps1[1]}
        assert times.newest_before({p0: (1, 2)}) == {p0: None}, "a range of a marker only holds no record"
        assert times.first_at({p0: 0}) == {p0: stamps[0]}, "the one consumer is reused"
    finally:
        times.close()
