"""The example pipeline on a three-node Kafka cluster whose brokers die under it.

The cluster replicates every partition three times with ``min.insync.replicas=2``, so a producer with
``acks=all`` loses nothing while one node is down. While the pipeline runs and a producer writes numbered events
without pause, the leader of a partition the job reads is killed with ``kill -9`` and brought back, then the
broker that coordinates the job's consumer group. The job keeps running, its group commits resume, ``verify``
finds the group in sync with the checkpoint, and every acknowledged event is in the output exactly once.

Before it: an offset lookup while a leader is down waits instead of spinning. librdkafka's admin ListOffsets
retried without pause while the leader was dead (a core per asking client for the whole request): on two cores
the driver's heartbeat thread then went unscheduled for ten seconds and the driver fenced itself.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.devstack.broker import start_local_broker
from airflow_kafka_stream.errors import KafkaAccessError
from airflow_kafka_stream.kafka import metadata
from tests.integration.cli_helpers import cli
from tests.integration.lifecycle.test_example_pipeline_ops import Example
from tests.kafka_utils import unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTS = 4
#: Seconds a killed node stays down: past librdkafka's and Kafka's session and leader-election timeouts.
DOWN_SECONDS = 8


class Feeder(threading.Thread):
    """Produces numbered events at a steady pace with acks=all; remembers the ids Kafka acknowledged."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        self.topic, self.acked, self.failed = topic, set(), []
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "log_level": 2, "message.timeout.ms": 120_000})
        self.stopping = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            for _ in range(20):
                event = {"id": f"e{n}", "key": f"k{n % 7}", "ts": "2026-01-01T00:00:00Z", "amount": n}
                self.producer.produce(self.topic, json.dumps(event).encode(), f"k{n % 7}".encode(),
                                      on_delivery=self._delivered(event["id"]))
                n += 1
            self.producer.poll(0)
            time.sleep(0.1)  # about 200 events a second: a steady feed, not a flood
        assert self.producer.flush(150) == 0

    def _delivered(self, event_id: str):
        def done(err, _msg) -> None:
            (self.failed.append((event_id, err)) if err is not None else self.acked.add(event_id))
        return done


def wait(condition, timeout: float, what: str, driver, log_path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert driver.poll() is None, f"the driver died while {what}:\n{log_path.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"timed out: {what}\n{log_path.read_text()[-3000:]}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster():
    with start_local_broker(nodes=3) as started:
        yield started


def cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def test_an_offset_lookup_waits_for_a_dead_leader_without_spinning(cluster):
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    topic = unique("dead-leader")
    for future in admin.create_topics([NewTopic(topic, PARTS, 3)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 2})
    for n in range(40):
        producer.produce(topic, b"x", partition=n % PARTS)
    assert producer.flush(30) == 0
    config = {"bootstrap.servers": bootstrap}
    partitions = [TopicPartition(topic, p) for p in range(PARTS)]
    assert metadata.watermarks(config, partitions) == {tp: (0, 10) for tp in partitions}

    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    cluster.kill(leader)
    try:
        began, cpu = time.monotonic(), cpu_seconds()
        try:  # the controller moves the leadership within seconds: the lookup may see it, or give up, named
            found = metadata.watermarks(config, partitions, timeout=5, retry_for=6)
        except KafkaAccessError as exc:
            found = str(exc)
        spent, took = cpu_seconds() - cpu, time.monotonic() - began
        # The admin client's lookup spent about one CPU-second per second of waiting.
        assert spent < 0.3 * took + 0.5, f"{spent:.1f}s of CPU in {took:.1f}s: the lookup spins ({found})"
        assert found == {tp: (0, 10) for tp in partitions} or "list the watermarks" in found, found
    finally:
        cluster.restart(leader)
    assert metadata.watermarks(config, partitions, retry_for=30) == {tp: (0, 10) for tp in partitions}


@pytest.mark.timeout(1200)
def test_the_pipeline_rides_out_a_partition_leader_and_its_group_coordinator_dying(cluster, tmp_path, capsys):
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    topic = unique("failover")
    for future in admin.create_topics([NewTopic(topic, PARTS, 3)]).values():
        future.result(30)
    ex = Example(tmp_path, bootstrap, topic, unique("failover-group"))
    feeder = Feeder(bootstrap, topic)
    feeder.start()
    # The default heartbeat (5 s; the driver fences itself after two missed): the example tests' 1 s leaves a
    # driver 2 s of silence, which a loaded two-core machine in the middle of a leader election can exceed.
    driver, log_path = ex.start("--trigger-interval", "1 second", "--heartbeat-seconds", "5")
    try:
        def committed_batches() -> int:
            return int((ex.job.jobhome.status() or {}).get("last_batch_id") or -1) + 1

        def group_caught_up_since(batches: int):
            return lambda: committed_batches() > batches + 2

        wait(lambda: committed_batches() >= 2, 300, "starting", driver, log_path)

        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        cluster.kill(leader)
        time.sleep(DOWN_SECONDS)
        cluster.restart(leader)
        wait(group_caught_up_since(committed_batches()), 300, "reading after the leader died", driver, log_path)

        coordinator = admin.describe_consumer_groups([ex.group])[ex.group].result(30).coordinator.id
        cluster.kill(coordinator)
        time.sleep(DOWN_SECONDS)
        cluster.restart(coordinator)
        wait(group_caught_up_since(committed_batches()), 300, "reading after the coordinator died", driver,
             log_path)

        feeder.stopping.set()
        feeder.join(180)
        assert not feeder.failed, feeder.failed[:5]
        wait(lambda: sum(ex.job.position().values()) >= len(feeder.acked), 300, "catching up", driver,
             log_path)
        verified = cli(capsys, "verify", "--job-home", str(ex.home), "--json")
        assert verified.json()["status"] == "OK", verified.out
        stopped = cli(capsys, "stop", "--job-home", str(ex.home), "--timeout", "300")
        assert stopped.code == 0, stopped.err
        assert driver.wait(120) == 0, log_path.read_text()[-4000:]
    finally:
        feeder.stopping.set()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)  # its JVM and Spark's Python processes too
    ids = ex.ids()
    assert len(ids) == len(set(ids)), "no event written twice"
    assert set(ids) == feeder.acked, "every acknowledged event written"
