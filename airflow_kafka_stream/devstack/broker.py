"""Start Apache Kafka on loopback: one KRaft node, or a cluster of three, for the demo, the tests and benchmarks.

Each node runs broker and controller in one JVM (KRaft combined mode): its storage is formatted with Kafka's
``StorageTool`` and then ``kafka.Kafka`` starts on it. The jars come from ``jvm/kafka-broker/pom.xml``, copied by
``scripts/setup-jvm``; nothing is downloaded here. Production jobs talk to their own cluster; the settings below
are chosen for a test broker (see docs/development.md): no topic is ever created by a client's request, groups
rebalance at once, and retention and compaction act within seconds when a topic asks for them.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from airflow_kafka_stream.cluster.jvm_jars import jvm_jars_folder
from airflow_kafka_stream.errors import StreamError

log = logging.getLogger(__name__)

#: Where scripts/setup-jvm copies the broker's jars, inside the environment (``.venv/jvm/kafka-broker``).
JARS_ENV = "AKS_KAFKA_BROKER_JARS"
#: The broker JVM's heap: a test broker holds little, and the Spark drivers beside it need the memory more.
HEAP = "-Xmx512m"
START_TIMEOUT = 90.0

_LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = kafka
logger.kafka.level = WARN
"""


#: The lowest port a local server is given: above the well-known and most registered services' ports.
LOWEST_SERVER_PORT = 10000


def free_port() -> int:
    """A free TCP port on the loopback interface for a server started next, below the kernel's ephemeral range.

    A port the kernel hands out for ``bind(0)`` or for an outgoing connection comes from the ephemeral range
    (``net.ipv4.ip_local_port_range``), so between this call and the server's own bind (an Airflow component or a
    JVM takes seconds to get there) any process of the host could take the same port: a test run of three workers
    met a Spark driver's listener where its Airflow api-server was to be. A random free port below that range is
    taken by nobody who does not ask for it by number.
    """
    low = _ephemeral_ports()[0]
    if low > LOWEST_SERVER_PORT + 100:
        for _ in range(50):
            port = random.randrange(LOWEST_SERVER_PORT, low)
            if _port_free(port):
                return port
    with socket.socket() as sock:  # no room below the ephemeral range: any free port
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default when it cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def broker_jars() -> Path:
    """The folder of the broker's jars, or an error that says how to get them."""
    folder = jvm_jars_folder("kafka-broker", JARS_ENV)
    if not any(folder.glob("kafka_2.13-*.jar")):
        raise StreamError(f"the local Kafka broker's jars are not in {folder}: run scripts/setup-jvm (it copies "
                          f"them with mvn, pinned by jvm/kafka-broker/pom.xml), or set {JARS_ENV} to their folder")
    return folder


def java_command() -> str:
    """The ``java`` to run the broker with; Kafka 4 needs Java 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise StreamError("the local Kafka broker needs Java 17 or newer and found no java: install "
                          "openjdk-17-jre-headless or set JAVA_HOME")
    done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    version = _java_major(done.stderr + done.stdout)
    if version is not None and version < 17:
        raise StreamError(f"the local Kafka broker needs Java 17 or newer; {java} is Java {version}: install "
                          "openjdk-17-jre-headless or point JAVA_HOME at a newer Java")
    return java


def _java_major(text: str) -> int | None:
    for word in text.split():
        word = word.strip('"')
        if word[:1].isdigit():
            head = word.split(".")[0] if not word.startswith("1.") else word.split(".")[1]
            return int(head) if head.isdigit() else None
    return None


@dataclass
class KafkaNode:
    """One KRaft node (broker and controller in one JVM) of a local cluster."""

    node_id: int
    port: int
    controller_port: int
    config: Path
    log_path: Path
    process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class LocalBroker:
    """A running local Kafka (one node or several); use as a context manager or call ``stop()``."""

    nodes: list[KafkaNode]
    workdir: Path = field(repr=False)
    java: str = field(repr=False, default="java")
    jars: Path = field(repr=False, default=Path())

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def log_path(self) -> Path:
        return self.nodes[0].log_path

    def node(self, node_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def kill(self, node_id: int) -> None:
        """``kill -9`` one node: what a crashed machine looks like to the rest of the cluster."""
        node = self.node(node_id)
        if node.running:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(30)

    def restart(self, node_id: int, timeout: float = START_TIMEOUT) -> None:
        """Start a killed node again on its own storage and wait until it answers."""
        node = self.node(node_id)
        _launch(node, self.java, self.jars)
        _wait_answers([node], timeout)

    def stop(self) -> None:
        for node in self.nodes:
            if node.running:
                node.process.terminate()
        deadline = time.monotonic() + 20
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(10)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_broker(port: int | None = None, nodes: int = 1, timeout: float = START_TIMEOUT) -> LocalBroker:
    """Start Apache Kafka on loopback (``nodes`` KRaft nodes) and wait until every node answers.

    One node keeps its internal topics at replication factor 1; three nodes replicate everything three times
    with ``min.insync.replicas=2``, so one node may die without losing an acknowledged record.
    """
    if nodes not in (1, 3):
        raise StreamError(f"a local Kafka cluster has 1 or 3 nodes, not {nodes}")
    if port is not None and not _port_free(port):
        raise StreamError(f"port {port} on 127.0.0.1 is in use: choose another port for the local Kafka broker, "
                          "or leave it unset to take a free one")
    jars, java = broker_jars(), java_command()
    workdir = Path(tempfile.mkdtemp(prefix="kafka-"))
    members = [KafkaNode(node_id=i + 1, port=(port if i == 0 and port else free_port()), controller_port=free_port(),
                         config=workdir / f"node-{i + 1}.properties", log_path=workdir / f"node-{i + 1}.log")
               for i in range(nodes)]
    broker = LocalBroker(nodes=members, workdir=workdir, java=java, jars=jars)
    (workdir / "log4j2.properties").write_text(_LOG4J2)
    try:
        cluster_id = _cluster_id()
        for node in members:
            node.config.write_text(_server_properties(node, members, workdir))
            _run_tool(java, jars, workdir, ["kafka.tools.StorageTool", "format", "-t", cluster_id,
                                            "-c", str(node.config), "--ignore-formatted"])
        for node in members:
            _launch(node, java, jars)
        _wait_answers(members, timeout)
    except BaseException:
        broker.stop()
        raise
    log.info("local Kafka up at %s", broker.bootstrap_servers)
    return broker


def existing_or_local_broker() -> tuple[str, LocalBroker | None]:
    """Bootstrap servers from KAFKA_BOOTSTRAP_SERVERS, or of a local broker started now (stop it after)."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        return given, None
    broker = start_local_broker()
    return broker.bootstrap_servers, broker


def _server_properties(node: KafkaNode, members: list[KafkaNode], workdir: Path) -> str:
    replicas = len(members)
    min_isr = 2 if replicas >= 3 else 1
    voters = ",".join(f"{m.node_id}@127.0.0.1:{m.controller_port}" for m in members)
    settings = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(workdir / f"data-{node.node_id}"),
        # A client's metadata request never creates a topic: jobs and tests create theirs, as on a managed cluster.
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": 5,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 5,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # A group's first member is assigned at once instead of after the default 3 s wait for more members.
        "group.initial.rebalance.delay.ms": 0,
        # Retention and compaction that a topic asks for act within seconds, so tests can watch them happen.
        "log.retention.check.interval.ms": 1000,
        "log.segment.delete.delay.ms": 0,
        "log.cleaner.backoff.ms": 500,
        "file.delete.delay.ms": 0,
        # A transaction whose producer vanished is aborted a second after its timeout (default: up to 10 s later).
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    }
    if replicas == 1:
        # Kafka's own ACLs, open to everyone until an ACL names a resource: a test can then refuse one client one
        # thing (a transactional id, a group), as a secured cluster does, without a broker of its own. Not on three
        # nodes: until its ACLs are loaded the authorizer refuses every principal but a super user, and on plaintext
        # listeners the controllers' votes come from the same anonymous principal as every client's request, so the
        # quorum would never elect a leader (AuthorizerNotReadyException on VOTE).
        settings["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        settings["allow.everyone.if.no.acl.found"] = "true"
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A cluster id as Kafka's ``StorageTool random-uuid`` makes one (16 random bytes, URL-safe base64), without a JVM.

    Like Kafka's ``Uuid.randomUuid``, an id starting with ``-`` is drawn again: one in 64 does, and the storage
    tool's argument parser takes such a value for an option ("argument --cluster-id/-t: expected one argument").
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(random_bytes()).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _run_tool(java: str, jars: Path, workdir: Path, args: list[str]) -> str:
    cmd = [java, HEAP, f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}", "-cp", f"{jars}/*", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise StreamError(f"Kafka's {args[0]} {args[1]} failed (exit {done.returncode}): "
                          f"{(done.stderr or done.stdout)[-1500:]}")
    return done.stdout


def _launch(node: KafkaNode, java: str, jars: Path) -> None:
    workdir = node.config.parent
    cmd = [java, HEAP, "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
           "-cp", f"{jars}/*", "kafka.Kafka", str(node.config)]
    with open(node.log_path, "ab") as out:
        node.process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                                        start_new_session=True)


def _wait_answers(nodes: list[KafkaNode], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(nodes)
    while waiting and time.monotonic() < deadline:
        for node in list(waiting):
            if not node.running:
                text = node.log_path.read_text(errors="replace")[-2000:]
                raise StreamError(f"Kafka node {node.node_id} exited with code {node.process.returncode} while "
                                  f"starting (its log: {node.log_path}): {text}")
            if _answers_metadata(node.address, node.node_id):
                waiting.remove(node)
        time.sleep(0.2)
    if waiting:
        raise StreamError(f"Kafka node(s) {[n.node_id for n in waiting]} did not answer within {timeout:.0f}s "
                          f"(logs: {', '.join(str(n.log_path) for n in waiting)})")


def _answers_metadata(address: str, node_id: int) -> bool:
    """True once the node serves metadata that lists itself as a broker."""
    try:
        # log_level 2: "connection refused" while the broker starts is the expected answer, not a message for the screen
        metadata = AdminClient({"bootstrap.servers": address, "log_level": 2}).list_topics(timeout=1)
    except Exception:  # noqa: BLE001 - any failure means "not up yet"
        return False
    return node_id in metadata.brokers


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
