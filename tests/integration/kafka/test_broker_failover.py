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
from confluent_kafka import Consumer, ElectionType, Producer
from confluent_kafka import TopicPartition as KafkaPartition
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


def down_for_a_while(cluster, node: int) -> None:
    """``kill -9`` a node, keep it down past the election timeouts, bring it back."""
    cluster.kill(node)
    time.sleep(DOWN_SECONDS)
    cluster.restart(node)


def caught_up(feeder: Feeder, ex: Example, driver, log_path) -> None:
    """Stop the feeder (nothing it sent failed) and wait until the job has read every event Kafka acknowledged."""
    feeder.stopping.set()
    feeder.join(180)
    assert not feeder.failed, feeder.failed[:5]
    wait(lambda: sum(ex.job.position().values()) >= len(feeder.acked), 300, "catching up", driver, log_path)


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

        down_for_a_while(cluster, admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader)
        wait(group_caught_up_since(committed_batches()), 300, "reading after the leader died", driver, log_path)

        down_for_a_while(cluster, admin.describe_consumer_groups([ex.group])[ex.group].result(30).coordinator.id)
        wait(group_caught_up_since(committed_batches()), 300, "reading after the coordinator died", driver,
             log_path)

        caught_up(feeder, ex, driver, log_path)
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


def coordinator(admin: AdminClient, internal_topic: str, key: str) -> int:
    """The node that coordinates ``key`` (a transactional id in ``__transaction_state``, a group in
    ``__consumer_offsets``): the leader of its partition, ``abs(key.hashCode()) % partitions`` as Kafka places it."""
    log = admin.list_topics(internal_topic, timeout=10).topics[internal_topic]
    code = 0
    for char in key:  # Java's String.hashCode, as a 32-bit signed int
        code = (31 * code + ord(char)) & 0xFFFFFFFF
    code = code - (1 << 32) if code >= 1 << 31 else code
    return log.partitions[(0 if code == -(1 << 31) else abs(code)) % len(log.partitions)].leader


def leaders(admin: AdminClient, topic: str) -> set[int]:
    return {part.leader for part in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()}


def leadership_rebalanced(admin: AdminClient) -> None:
    """Every node leads partitions of both internal logs again. The earlier tests' kills moved leadership off the
    restarted nodes, and Kafka moves it back only after ``leader.imbalance.check.interval.seconds`` (five minutes):
    without a preferred election a node can lead no ``__consumer_offsets`` partition, and no group name it
    coordinates exists (CI: StopIteration after 1000 names)."""
    nodes = set(admin.list_topics(timeout=10).brokers)
    deadline = time.monotonic() + 120
    while not all(leaders(admin, log) >= nodes for log in ("__consumer_offsets", "__transaction_state")):
        assert time.monotonic() < deadline, "the preferred leaders were not elected again"
        admin.elect_leaders(ElectionType.PREFERRED, None).result(30)  # per-partition refusals: retried
        time.sleep(2)


def coordinated_by(admin: AdminClient, node: int) -> str:
    """A new group name whose sink marker group the node ``node`` coordinates."""
    from airflow_kafka_stream.core.batch_marker import marker_group

    return next(group for group in (unique("eos-failover-group") for _ in range(1000))
                if coordinator(admin, "__consumer_offsets", marker_group(group)) == node)


def test_the_kafka_sink_stays_exactly_once_when_its_leader_and_coordinator_die_inside_a_transaction(
        cluster, tmp_path, capsys, monkeypatch):
    """The example pipeline writing to a replicated output topic through the transactional sink; one batch waits
    (the sink's test hook) inside its transaction, with a record sent, while the node that leads the output's
    partitions, coordinates the sink's transactions and coordinates its marker group is killed (the hardest case:
    all three move at once; librdkafka's send_offsets_to_transaction can then block past its timeout). The batch
    then either commits through the new leader and coordinators, or gives up within the transaction's timeout and
    fails the driver, naming why (it never hangs in the commit); a failed driver is started again, as the
    supervisor does, and writes the batch once. Every acknowledged event is in the output once for a
    read_committed reader, and no transaction is left open."""
    from airflow_kafka_stream.core.batch_marker import transactional_id
    from airflow_kafka_stream.runtime.kafka_sink import BATCH_SECONDS, PAUSE_ENV, PAUSE_FILE_ENV, PAUSE_SECONDS_ENV
    from tests.integration.lifecycle.test_kafka_sink import open_partitions, read_topic

    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    source, output, job = unique("eos-failover-in"), unique("eos-failover-out"), unique("eos-failover")
    Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("warm-up"),
              "log_level": 2}).init_transactions(60)  # the transaction log exists from here on
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("warm-up"), "log_level": 2})
    probe.committed([KafkaPartition("warm-up", 0)], 60)  # the group log exists from here on
    probe.close()
    leadership_rebalanced(admin)
    victim = coordinator(admin, "__transaction_state", transactional_id(job, output))
    others = sorted(set(admin.list_topics(timeout=10).brokers) - {victim})
    leading = NewTopic(output, PARTS, replica_assignment=[[victim, *others]] * PARTS)
    for future in admin.create_topics([NewTopic(source, PARTS, 3), leading]).values():
        future.result(30)
    paused = tmp_path / "paused"
    monkeypatch.setenv(PAUSE_ENV, "writing")
    monkeypatch.setenv(PAUSE_FILE_ENV, str(paused))
    monkeypatch.setenv(PAUSE_SECONDS_ENV, str(DOWN_SECONDS + 4))
    ex = Example(tmp_path, bootstrap, source, coordinated_by(admin, victim))
    feeder = Feeder(bootstrap, source)
    feeder.start()
    run = ("--output-topic", output, "--job-name", job, "--trigger-interval", "1 second", "--heartbeat-seconds", "5")
    driver, log_path = ex.start(*run)
    try:
        wait(paused.exists, 300, "a batch inside its transaction", driver, log_path)
        assert admin.list_topics(output, timeout=10).topics[output].partitions[0].leader == victim
        down_for_a_while(cluster, victim)
        feeder.stopping.set()
        feeder.join(180)
        deadline = time.monotonic() + BATCH_SECONDS + 60
        while (sum(ex.job.position().values()) < len(feeder.acked) and driver.poll() is None
               and time.monotonic() < deadline):
            time.sleep(1)
        if driver.poll() is not None:  # it gave up the batch: started again, as the supervisor would
            assert "gave up batch" in log_path.read_text(), log_path.read_text()[-4000:]
            monkeypatch.delenv(PAUSE_ENV)
            driver, log_path = ex.start(*run)
        caught_up(feeder, ex, driver, log_path)
        stopped = cli(capsys, "stop", "--job-home", str(ex.home), "--timeout", "300")
        assert stopped.code == 0, stopped.err
        assert driver.wait(120) == 0, log_path.read_text()[-4000:]
    finally:
        feeder.stopping.set()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    ids = [row["id"] for row in read_topic(bootstrap, output, partitions=PARTS)]
    assert len(ids) == len(set(ids)), "no event written twice"
    assert set(ids) == feeder.acked, "every acknowledged event written"
    assert open_partitions(bootstrap, output) == [], "a transaction is left open"
    sink = json.loads((ex.home / "status.json").read_text())["kafka_sink"]
    assert sink["transactions"]["committed"] >= 2 and sink["transactions"]["fenced"] == 0, sink
