"""Kafka to Kafka exactly once: the transactional sink against Spark's own Kafka sink (at-least-once).

The same job twice per round, one after the other in one JVM, on the same broker: read a preloaded topic
(RECORDS JSON events over PARTITIONS partitions) with Spark's Kafka connector, ``maxOffsetsPerTrigger`` BATCH,
``trigger(availableNow=True)``, turn each event into a key and a JSON value, and write it to a fresh output topic
  - with Spark's own Kafka sink (``writeStream.format("kafka")``): at-least-once, written by the tasks;
  - through this project's transactional sink (``runtime/kafka_sink.py``): each batch one Kafka transaction,
    written by the driver, committed with its batch marker.
A warm-up round runs both first (not measured). Each of ROUNDS rounds times how long each query takes to drain
the topic (its throughput is RECORDS over that) and the median duration of its batches. Prints
``eos_sink_vs_at_least_once`` (the median over rounds of the transactional sink's throughput over Spark's sink's;
bar 0.7, goal 0.9) and ``eos_sink_added_ms_per_batch`` (the median per-batch duration difference), and
``eos_sink_records_per_second``. Both outputs are read back with ``read_committed`` and counted.

    .venv/bin/python bench/bench_sink.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from smoke import SMOKE, count

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RECORDS = count("BENCH_SINK_RECORDS", 200_000, 2_000)
BATCH = count("BENCH_SINK_BATCH", 20_000, 500)
ROUNDS = count("BENCH_SINK_ROUNDS", 3, 1)
PARTITIONS = 3


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fill(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    from tests.kafka_utils import create_topic

    create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 5000})
    for i in range(RECORDS):
        producer.produce(topic, json.dumps({"id": f"e{i}", "key": f"k{i % 50}", "amount": i}).encode(),
                         f"k{i % 50}".encode())
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def output_count(bootstrap: str, topic: str) -> int:
    """Records a read_committed consumer sees in ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    seen, idle = 0, 0
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    while idle < 4:
        messages = consumer.consume(10_000, 0.5)
        idle = idle + 1 if not messages else 0
        seen += sum(1 for m in messages if m.error() is None)
    consumer.close()
    return seen


def records(spark, bootstrap: str, topic: str):
    from pyspark.sql import functions as F

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", BATCH).load())
    parsed = F.from_json(F.col("value").cast("string"), "id string, key string, amount double")
    return raw.select(F.col("key").cast("string").alias("key"),
                      F.to_json(F.struct(parsed["id"].alias("id"), parsed["amount"].alias("amount"),
                                         "partition", "offset")).alias("value"))


def run(spark, bootstrap: str, source: str, kind: str, work: Path) -> tuple[float, float]:
    """Drain ``source`` into a fresh topic with the sink ``kind``: (seconds, median batch milliseconds)."""
    from airflow_kafka_stream.runtime.kafka_sink import TransactionalKafkaSink
    from tests.kafka_utils import create_topic

    out = create_topic(bootstrap, f"bench-out-{kind}-{uuid.uuid4().hex[:8]}", PARTITIONS)
    writer = records(spark, bootstrap, source).writeStream.trigger(availableNow=True)
    sink = None
    if kind == "eos":
        sink = TransactionalKafkaSink({"bootstrap.servers": bootstrap}, out, job_name=f"bench-{out}",
                                      group=f"bench-{out}", generation=lambda: 1)
        writer = writer.foreachBatch(sink.write)
    else:
        writer = writer.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", out)
    started = time.monotonic()
    query = writer.option("checkpointLocation", str(work / f"cp-{out}")).start()
    query.awaitTermination()
    seconds = time.monotonic() - started
    durations = [p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]]
    if sink is not None:
        sink.close(30)
    written = output_count(bootstrap, out)
    assert written == RECORDS, f"{kind} wrote {written} of {RECORDS}"
    return seconds, statistics.median(durations)


def main() -> int:
    from airflow_kafka_stream.runtime.session import local_session

    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    source = f"bench-sink-in-{uuid.uuid4().hex[:8]}"
    fill(bootstrap, source)
    spark = local_session("bench_sink", cores="2")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for kind in () if SMOKE else ("spark", "eos"):  # warm-up (a smoke run only shows that it runs)
            run(spark, bootstrap, source, kind, work)
        ratios, added, rates = [], [], []
        for round_number in range(ROUNDS):
            order = ("spark", "eos") if round_number % 2 == 0 else ("eos", "spark")
            measured = {kind: run(spark, bootstrap, source, kind, work) for kind in order}
            (spark_s, spark_ms), (eos_s, eos_ms) = measured["spark"], measured["eos"]
            say(f"# round {round_number}: spark sink {spark_s:.1f}s ({spark_ms:.0f} ms/batch), "
                f"transactional {eos_s:.1f}s ({eos_ms:.0f} ms/batch)")
            ratios.append(spark_s / eos_s)
            added.append(eos_ms - spark_ms)
            rates.append(RECORDS / eos_s)
    spark.stop()
    print(f"eos_sink_vs_at_least_once: {statistics.median(ratios):.2f}")
    print(f"eos_sink_added_ms_per_batch: {statistics.median(added):.0f}")
    print(f"eos_sink_records_per_second: {statistics.median(rates):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
