"""The fixed cost of a small micro-batch: kafka_stream against Spark's engine floor and the Python one.

Streaming queries with a noop sink, each batch ROWS (300) rows over PARTITIONS (3) Spark
partitions, run one after another in the same JVM:
  - ``kafka_stream`` reading a preloaded topic of 3 partitions with maxOffsetsPerTrigger=ROWS and
    readMode=driver (the driver reads a batch while it plans it);
  - the same with no readMode, as a user starts it (readMode=auto: a batch this small is read on the
    driver);
  - the same with no readMode from a topic written one record per produce request, the shape a slow
    topic has (every record its own batch in the log), where the first topic is written 1,000 records
    a request;
  - the same in readMode=executors (Python tasks read the batch);
  - Spark's own Kafka connector (``format("kafka")``) on the same topic with maxOffsetsPerTrigger=ROWS, its other
    settings its defaults: the batch a team already on that connector runs;
  - Spark's ``rate-micro-batch`` source (rowsPerBatch=ROWS, numPartitions=PARTITIONS), projected to
    the source's columns: the engine's own floor for a batch of that size;
  - a trivial Python streaming data source (bench/memory_source.py) that yields the same rows from
    memory, one Arrow batch per task, in PARTITIONS tasks: the floor of Spark's Python data source
    framework's tasks; the same in one task (kafka_stream packs a small batch's ranges into one
    task, see minRecordsPerTask); and the same made on the driver by a ``SimpleDataSourceStreamReader``,
    the floor of the framework's driver-side reads.
A warm-up round runs each query first (not measured). Then ROUNDS rounds, in an order that rotates
each round, run each query for SKIP + BATCHES batches; the first SKIP batches of a query (its start)
are not counted, and the round's figure is the median ``durationMs.triggerExecution`` of the rest.
Prints ``small_batch_default_vs_rate`` and ``small_batch_single_record_vs_rate``: the medians over
rounds of kafka_stream's figure with no readMode, on each topic, divided by the rate source's;
``small_batch_vs_rate`` and ``small_batch_vs_python_floor``: readMode=driver against the rate source
and the Python floor of the same kind of read (driver-side); and ``small_batch_executors_vs_rate``
and ``small_batch_executors_vs_python_floor``: the same for readMode=executors, against the task floor;
``small_batch_vs_spark_kafka``: kafka_stream as a user starts it (no readMode) against Spark's connector. Per-phase medians (latestOffset, queryPlanning,
addBatch, ...) go to stderr. Uses KAFKA_BOOTSTRAP_SERVERS when set, else starts a local Apache Kafka broker.

    .venv/bin/python bench/bench_small_batch.py
"""

from __future__ import annotations

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

ROWS = count("BENCH_SMALL_ROWS", 300, 30)
PARTITIONS = 3
BATCHES = count("BENCH_SMALL_BATCHES", 20, 2)
SKIP = count(None, 3, 1)
ROUNDS = count("BENCH_SMALL_ROUNDS", 5, 1)
VALUE = b"x" * 90
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


def say(text: str, *args: object) -> None:
    print(text % args if args else text, file=sys.stderr, flush=True)


def fill_topic(bootstrap: str, topic: str, records: int) -> None:
    """Produce in batches, as a busy producer writes a topic."""
    from confluent_kafka import Producer

    from tests.kafka_utils import create_topic

    create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 1000})
    for i in range(records):
        producer.produce(topic, VALUE, b"%010d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def fill_topic_one_record_per_request(bootstrap: str, topic: str, records: int) -> None:
    """Each record in a produce request of its own, as a slow topic is written: one log batch per record."""
    from confluent_kafka import Producer

    from tests.kafka_utils import create_topic

    create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(records):
        producer.produce(topic, VALUE, b"%010d" % i, partition=i % PARTITIONS)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def kafka_frame(spark, bootstrap: str, topic: str, source: str = "kafka_stream", **extra: str):
    return (
        spark.readStream.format(source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", ROWS)
        .options(**extra)
        .load()
    )


def memory_frame(spark, partitions: int, on_driver: bool = False):
    return (
        spark.readStream.format("bench_memory")
        .option("rowsPerBatch", ROWS)
        .option("numPartitions", partitions)
        .option("onDriver", str(on_driver).lower())
        .load()
    )


def rate_frame(spark):
    from bench_source import kafka_shaped_rate

    return kafka_shaped_rate(spark, ROWS, PARTITIONS, PARTITIONS, VALUE)


def batch_durations(spark, frame, checkpoints: str, label: str) -> list[dict]:
    """Run the query for SKIP + BATCHES batches; the durationMs of the batches after the first SKIP."""
    query = (
        frame.writeStream.format("noop")
        .trigger(processingTime="0 seconds")
        .option("checkpointLocation", f"{checkpoints}/{label}-{uuid.uuid4().hex[:6]}")
        .start()
    )
    deadline = time.monotonic() + 600
    while len([p for p in query.recentProgress if p["numInputRows"]]) < SKIP + BATCHES:
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{label} query failed or stalled: {query.exception()}")
        time.sleep(0.05)
    spark.sparkContext.setLogLevel("OFF")  # stopping mid-batch logs the cancelled tasks as errors
    query.stop()
    spark.sparkContext.setLogLevel("WARN")
    batches = [p for p in query.recentProgress if p["numInputRows"]][SKIP : SKIP + BATCHES]
    wrong = [p["numInputRows"] for p in batches if p["numInputRows"] != ROWS]
    assert not wrong, f"{label}: batches of {wrong} rows, expected {ROWS}"
    return [p["durationMs"] for p in batches]


def median_ms(durations: list[dict], phase: str = "triggerExecution") -> float:
    return statistics.median(d.get(phase, 0) for d in durations)


def main() -> None:
    from airflow_kafka_stream.devstack.broker import existing_or_local_broker
    from airflow_kafka_stream.runtime.session import local_session
    from bench.memory_source import MemorySource, workers_can_import_this

    bootstrap, broker = existing_or_local_broker()
    spark = None
    try:
        topic = f"bench-small-{uuid.uuid4().hex[:8]}"
        fill_topic(bootstrap, topic, ROWS * (SKIP + BATCHES + 10))
        single = f"bench-small-single-{uuid.uuid4().hex[:8]}"
        fill_topic_one_record_per_request(bootstrap, single, ROWS * (SKIP + BATCHES + 10))
        workers_can_import_this()
        spark = local_session("bench-small-batch", cores="*")
        spark.dataSource.register(MemorySource)
        frames = {
            "kafka_stream": lambda: kafka_frame(spark, bootstrap, topic, readMode="driver"),
            "kafka_stream_default": lambda: kafka_frame(spark, bootstrap, topic),
            "kafka_stream_single_record": lambda: kafka_frame(spark, bootstrap, single),
            "kafka_stream_executors": lambda: kafka_frame(spark, bootstrap, topic, readMode="executors"),
            "spark_kafka": lambda: kafka_frame(spark, bootstrap, topic, source="kafka"),
            "rate": lambda: rate_frame(spark),
            "python_floor": lambda: memory_frame(spark, PARTITIONS),
            "python_floor_one_task": lambda: memory_frame(spark, 1),
            "python_driver_floor": lambda: memory_frame(spark, 1, on_driver=True),
        }
        for extra in filter(None, os.environ.get("BENCH_SMALL_EXTRA", "").split(";")):
            # Context on stderr, e.g. BENCH_SMALL_EXTRA="kafkaConsumer.cache=false;floor:numPartitions=1"
            floor = extra.startswith("floor:")
            options = dict(pair.split("=", 1) for pair in extra.removeprefix("floor:").split(","))
            if floor:
                options = {"rowsPerBatch": str(ROWS), "numPartitions": str(PARTITIONS), **options}
                frames[extra] = lambda o=options: spark.readStream.format("bench_memory").options(**o).load()
            else:
                frames[extra] = lambda o=options: kafka_frame(spark, bootstrap, topic, **o)
        figures: dict[str, list[float]] = {name: [] for name in frames}
        phases: dict[str, list[dict]] = {name: [] for name in frames}
        with tempfile.TemporaryDirectory() as checkpoints:
            if not SMOKE:
                say("warm-up round (not measured)")
                for name, frame in frames.items():
                    batch_durations(spark, frame(), checkpoints, name)
            names = list(frames)
            for round_number in range(ROUNDS):
                order = names[round_number % len(names) :] + names[: round_number % len(names)]
                for name in order:
                    durations = batch_durations(spark, frames[name](), checkpoints, name)
                    figures[name].append(median_ms(durations))
                    phases[name].extend(durations)
                say("round %d: %s", round_number + 1, ", ".join(f"{n} {figures[n][-1]:.0f} ms" for n in names))
        for name in frames:
            detail = ", ".join(f"{phase} {median_ms(phases[name], phase):.0f}" for phase in PHASES)
            say("%s: median batch %.0f ms (%s)", name, statistics.median(figures[name]), detail)
        median = {name: statistics.median(values) for name, values in figures.items()}
        print(f"small_batch_default_vs_rate: {median['kafka_stream_default'] / median['rate']:.2f}")
        print(f"small_batch_single_record_vs_rate: {median['kafka_stream_single_record'] / median['rate']:.2f}")
        print(f"small_batch_vs_rate: {median['kafka_stream'] / median['rate']:.2f}")
        print(f"small_batch_vs_python_floor: {median['kafka_stream'] / median['python_driver_floor']:.2f}")
        print(f"small_batch_executors_vs_rate: {median['kafka_stream_executors'] / median['rate']:.2f}")
        print(f"small_batch_executors_vs_python_floor: {median['kafka_stream_executors'] / median['python_floor']:.2f}")
        print(f"small_batch_vs_spark_kafka: {median['kafka_stream_default'] / median['spark_kafka']:.2f}")
        say("kafka_stream executors / one-task Python floor: %.2f",
            median["kafka_stream_executors"] / median["python_floor_one_task"])
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
