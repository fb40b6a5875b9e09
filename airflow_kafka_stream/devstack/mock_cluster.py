"""Host librdkafka's mock Kafka cluster in a helper process, for tests of real Kafka's offset gaps.

The test broker (tansu) writes no transaction markers, so its offsets have no
gaps. The mock cluster inside librdkafka (the one the confluent-kafka wheel
ships; client setting ``test.mock.num.brokers``) does: every commit or abort of
a transaction leaves an offset holding a control record, as real Kafka does.
Any client may connect to it over TCP while the client that hosts it lives.

Known differences from Kafka (librdkafka 2.16, measured): ``read_committed``
does not filter aborted records (the mock's fetch answers list no aborted
transactions); offsets-for-times always answers -1 ("no record at or after the
time"); no CreateTopics (a topic is created with 4 partitions when a client
first asks for it), DescribeGroups or DescribeTopics.

Run as ``python -m airflow_kafka_stream.devstack.mock_cluster``: it prints one
JSON line ``{"bootstrap_servers": ...}`` and serves until its standard input
closes (so it ends with the process that started it, even one killed with
SIGKILL) or it gets SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from airflow_kafka_stream.errors import StreamError

#: Partitions of a topic the mock creates on first use (librdkafka's default for its mock cluster).
MOCK_TOPIC_PARTITIONS = 4


def serve(brokers: int) -> int:
    """Create the mock cluster, print its bootstrap servers, and keep it up until stdin closes."""
    from confluent_kafka import Producer

    # The host client is never used to produce: it only owns the mock cluster, which runs on its own thread.
    host = Producer({"test.mock.num.brokers": brokers, "client.id": "mock-cluster-host", "log_level": 3})
    found = host.list_topics(timeout=10).brokers
    servers = ",".join(f"{b.host}:{b.port}" for _id, b in sorted(found.items()))
    print(json.dumps({"bootstrap_servers": servers, "brokers": len(found)}), flush=True)
    while sys.stdin.readline():  # EOF: the parent closed the pipe or died
        pass
    return 0


@dataclass
class MockCluster:
    """A running helper process hosting a mock cluster; use as a context manager or call stop()."""

    bootstrap_servers: str
    process: subprocess.Popen
    log_path: Path
    workdir: Path = field(repr=False)

    def stop(self, timeout: float = 10.0) -> None:
        """Close the helper's stdin (it exits on EOF), then terminate or kill it if it lingers."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_mock_cluster(brokers: int = 3, timeout: float = 20.0) -> MockCluster:
    """Start the helper process and wait (at most ``timeout`` seconds) for the cluster's bootstrap servers."""
    workdir = Path(tempfile.mkdtemp(prefix="mock-kafka-"))
    log_path = workdir / "mock-cluster.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "airflow_kafka_stream.devstack.mock_cluster", "--brokers", str(brokers)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, env=dict(os.environ),
            start_new_session=True,  # a Ctrl-C in the test terminal goes to pytest, which then stops it
        )
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    answer = line[0] if line else b""
    try:
        servers = json.loads(answer)["bootstrap_servers"]
    except (ValueError, KeyError, TypeError):
        cluster = MockCluster("", proc, log_path, workdir)
        cluster.stop(5)
        text = log_path.read_text(errors="replace")[-2000:]
        raise StreamError(f"the mock cluster did not start within {timeout}s (answer {answer!r}): {text}") from None
    return MockCluster(servers, proc, log_path, workdir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3, help="mock brokers (partition leaders spread over them)")
    return serve(parser.parse_args(argv).brokers)


if __name__ == "__main__":
    raise SystemExit(main())
