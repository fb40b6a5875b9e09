"""Source throughput on a Spark standalone cluster (two workers of one core) over local mode with two cores.

Loads one topic (BENCH_RECORDS, default 2,000,000 records of ~100 bytes in 4 partitions) and reads it
with the kafka_stream source into a noop sink (availableNow), in the same driver process:
  - local[2]: the driver's JVM runs the two tasks at a time;
  - spark://127.0.0.1 with two workers of one core each (pyspark's spark-class), executors in their own
    JVMs, their Python workers on this environment's interpreter (the same machine: what the cluster path
    adds is task shipping, executor processes and result traffic, not a different reader).
The modes alternate BENCH_ROUNDS times (default 2, the order swapped every round since the driver's JVM
keeps warming), BENCH_RUNS (default 3) measured runs each, so a slow minute on a shared machine hits both.
Every JVM that runs the tasks gets BENCH_WARMUPS runs before it is measured (a fresh JVM is several times
slower on its first queries, and still a third slower on its second): local mode's tasks run in the
driver's JVM, which lives across rounds, so it warms once; the cluster's executors are new JVMs in every
round's application, so they warm every round, after both have registered. A streaming job's executors
are warm for days; measuring the cluster's second query against local mode's twentieth compared JIT
states, not paths (0.72-0.88 in runs that did so). Prints ``cluster_vs_local: <ratio>`` of the medians;
details on stderr. Uses KAFKA_BOOTSTRAP_SERVERS when set, else starts a local Apache Kafka broker.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid

from bench_source import RECORDS, load_topic, say, source_rate
from smoke import count

RUNS = count("BENCH_RUNS", 3, 1)
ROUNDS = count("BENCH_ROUNDS", 2, 1)
WARMUPS = count("BENCH_WARMUPS", 3, 0)
WORKERS = 2


def session(master: str):
    from pyspark.sql import SparkSession

    from airflow_kafka_stream.source.source import register

    builder = (SparkSession.builder.master(master).appName(f"bench-cluster-{master.split(':')[0]}")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "2g")
               .config("spark.pyspark.python", sys.executable))
    if master.startswith("spark://"):
        builder = (builder.config("spark.driver.host", "127.0.0.1").config("spark.executor.memory", "900m")
                   .config("spark.cores.max", "2"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def wait_for_executors(spark, wanted: int, timeout: float = 60.0) -> None:
    """Block until ``wanted`` executors have registered: a warm-up that starts them warms nothing measured."""
    from airflow_kafka_stream.runtime.session import executor_count

    deadline = time.monotonic() + timeout
    while executor_count(spark) < wanted:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {executor_count(spark)} of {wanted} executors registered in {timeout:.0f}s")
        time.sleep(0.2)


def measure(master: str, bootstrap: str, topic: str, checkpoints: str, warmups: int) -> list[float]:
    spark = session(master)
    try:
        if master.startswith("spark://"):
            wait_for_executors(spark, WORKERS)
            say("%s: %d executors registered", master, WORKERS)
        for _ in range(warmups):
            source_rate(spark, bootstrap, topic, checkpoints)
        return [source_rate(spark, bootstrap, topic, checkpoints) for _ in range(RUNS)]
    finally:
        spark.stop()


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from airflow_kafka_stream.devstack.broker import existing_or_local_broker
    from airflow_kafka_stream.devstack.spark_cluster import start_local_cluster

    bootstrap, broker = existing_or_local_broker()
    cluster = None
    try:
        topic = f"bench-cluster-{uuid.uuid4().hex[:8]}"
        load_topic(bootstrap, topic)
        cluster = start_local_cluster(workers=WORKERS, cores_per_worker=1, worker_memory="1g")
        local_rates: list[float] = []
        cluster_rates: list[float] = []
        with tempfile.TemporaryDirectory() as checkpoints:
            for round_number in range(ROUNDS):
                # The driver's JVM keeps warming over the first rounds, which favours whichever mode runs later:
                # the order alternates from round to round.
                modes = [("local", "local[2]"), ("cluster", cluster.master_url)]
                for name, master in modes if round_number % 2 == 0 else reversed(modes):
                    # Local tasks run in the driver's JVM, warm since round 0; each round's executors are new.
                    warmups = WARMUPS if round_number == 0 or name == "cluster" else 1
                    rates = measure(master, bootstrap, topic, checkpoints, warmups)
                    (local_rates if name == "local" else cluster_rates).extend(rates)
        local, remote = statistics.median(local_rates), statistics.median(cluster_rates)
        say("local[2] rows/s: median %.0f of %s", local, ", ".join(f"{r:.0f}" for r in local_rates))
        say("cluster (2 workers x 1 core) rows/s: median %.0f of %s", remote,
            ", ".join(f"{r:.0f}" for r in cluster_rates))
        say("%d records per run", RECORDS)
        print(f"cluster_vs_local: {remote / local:.2f}")
    finally:
        if cluster is not None:
            cluster.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
