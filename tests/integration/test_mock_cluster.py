"""The mock-cluster helper process: it serves Kafka clients, stops on request, and never outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from airflow_kafka_stream.devstack.mock_cluster import MOCK_TOPIC_PARTITIONS, start_mock_cluster
from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def gone(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` ended within ``timeout`` seconds (a zombie not yet reaped by its new parent counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat")
            if stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


def test_serves_clients_and_stops():
    with start_mock_cluster(brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 3})
        metadata = admin.list_topics("made-on-first-use", timeout=10)
        assert len(metadata.brokers) == 3
        assert len(metadata.topics["made-on-first-use"].partitions) == MOCK_TOPIC_PARTITIONS
    assert cluster.process.returncode == 0, "it ends on its own when its stdin closes"
    assert not cluster.log_path.parent.exists()


def test_ends_when_its_parent_is_killed():
    """A test run killed with SIGKILL leaves no mock cluster behind: the helper sees its stdin close."""
    parent = subprocess.Popen(
        [sys.executable, "-c", "from airflow_kafka_stream.devstack.mock_cluster import start_mock_cluster\n"
         "import time\nc = start_mock_cluster()\nprint(c.process.pid, flush=True)\ntime.sleep(120)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        helper = int(parent.stdout.readline())
        assert not gone(helper, 0.5), "the helper runs while its parent lives"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        parent.stdout.close()
    assert gone(helper, 10), f"helper {helper} outlived its killed parent"
