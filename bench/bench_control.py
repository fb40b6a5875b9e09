"""Scaling of the control plane's reads: 1,000 partitions against 10.

Verifying a job and planning a reset to a datetime (broker lookups included)
should cost a fixed number of requests, so their wall time should barely grow
with the partition count. Prints exactly two lines:
``verify_1000_vs_10: <ratio>`` and ``reset_plan_1000_vs_10: <ratio>`` (median wall
time on 1,000 partitions divided by the median on 10; goal <= 3); details go to
stderr. Uses KAFKA_BOOTSTRAP_SERVERS when set, else starts a local Apache Kafka broker.

    .venv/bin/python bench/bench_control.py
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from smoke import SMOKE, count

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.reset_scope import parse_scope
from airflow_kafka_stream.core.reset_strategy import ResetStrategy
from airflow_kafka_stream.kafka.control_inputs import plan_job_reset, verify_job
from airflow_kafka_stream.kafka.groups import alter_group_offsets
from airflow_kafka_stream.kafka.metadata import forget_clients
from airflow_kafka_stream.render.checkpoint import verify_text
from airflow_kafka_stream.render.reset import plan_text

SIZES = (10, count(None, 1000, 20))
REPEATS = count("BENCH_CONTROL_REPEATS", 5, 1)


def say(text: str, *args: object) -> None:
    print(text % args if args else text, file=sys.stderr, flush=True)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.perf_counter()
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        future.result(120)
    while True:
        topic = admin.list_topics(name, timeout=30).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            break
        time.sleep(0.1)
    say("created %s with %d partitions in %.2fs", name, partitions, time.perf_counter() - started)


def produce_one_each(bootstrap: str, topics: dict[str, int]) -> None:
    """One record per partition."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for topic, partitions in topics.items():
        for partition in range(partitions):
            producer.produce(topic, b"x", partition=partition)
            producer.poll(0)
    assert producer.flush(120) == 0, "records not delivered"


def median_seconds(action, fresh_clients: bool = True) -> float:
    """Median wall time of ``action``; by default each run connects afresh, as every CLI
    invocation and every Airflow task does (the source alone reuses clients across triggers)."""
    if not SMOKE:
        action()  # warm-up: imports, code paths
    samples = []
    for _ in range(REPEATS):
        if fresh_clients:
            forget_clients()
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    from airflow_kafka_stream.devstack.broker import existing_or_local_broker

    bootstrap, broker = existing_or_local_broker()
    try:
        config = {"bootstrap.servers": bootstrap}
        run = uuid.uuid4().hex[:8]
        topics = {f"bench-control-{size}-{run}": size for size in SIZES}
        for name, size in topics.items():
            create_topic(bootstrap, name, size)
        started = time.perf_counter()
        produce_one_each(bootstrap, topics)
        time.sleep(0.02)  # Kafka finds offsets for times to the millisecond
        between = datetime.now(UTC)
        time.sleep(0.02)
        produce_one_each(bootstrap, topics)
        say("produced 2 records per partition in %.2fs", time.perf_counter() - started)

        timings: dict[str, dict[int, float]] = {"verify": {}, "reset_plan": {}}
        for name, size in topics.items():
            checkpoint = {TopicPartition(name, p): 1 for p in range(size)}
            group = f"bench-control-group-{size}-{run}"
            alter_group_offsets(config, group, checkpoint)
            now = datetime.now(UTC)

            def verify(name=name, group=group, checkpoint=checkpoint, now=now):
                result = verify_job(config, group, checkpoint, [name], now=now, last_batch_at=now,
                                    stall_after=timedelta(minutes=15))
                assert len(result.partitions) == len(checkpoint), verify_text(result)

            def reset_plan(name=name, group=group, checkpoint=checkpoint):
                plan = plan_job_reset(config, group, checkpoint, [name], ResetStrategy.to_datetime(between),
                                      parse_scope(None))
                assert set(plan.checkpoint_offsets().values()) == {1}, plan_text(plan)

            timings["verify"][size] = median_seconds(verify)
            timings["reset_plan"][size] = median_seconds(reset_plan)
            say("%d partitions: verify %.3fs, reset plan to-datetime %.3fs (median of %d, fresh clients); "
                "with reused clients: verify %.3fs, reset plan %.3fs", size, timings["verify"][size],
                timings["reset_plan"][size], REPEATS, median_seconds(verify, False), median_seconds(reset_plan, False))
        small, large = SIZES
        print(f"verify_{large}_vs_{small}: {timings['verify'][large] / timings['verify'][small]:.2f}")
        print(f"reset_plan_{large}_vs_{small}: {timings['reset_plan'][large] / timings['reset_plan'][small]:.2f}")
        return 0
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
