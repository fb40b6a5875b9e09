"""A local Kafka that cannot start says why and what to do, before it starts anything."""

from __future__ import annotations

import socket

import pytest

from airflow_kafka_stream.devstack import broker
from airflow_kafka_stream.errors import StreamError


def test_missing_jars_name_the_folder_and_the_setup_script(tmp_path, monkeypatch):
    monkeypatch.setenv(broker.JARS_ENV, str(tmp_path))
    with pytest.raises(StreamError, match=f"jars are not in {tmp_path}: run scripts/setup-jvm"):
        broker.start_local_broker()


def test_a_missing_java_names_the_package_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(StreamError, match="needs Java 17 or newer and found no java: install openjdk-17"):
        broker.java_command()


@pytest.mark.parametrize("banner, major", [('openjdk version "17.0.15" 2025-04-15', 17),
                                           ('java version "1.8.0_392"', 8), ('openjdk version "21" 2023-09-19', 21)])
def test_the_java_version_is_read_from_its_banner(banner, major):
    assert broker._java_major(banner) == major


def test_a_taken_port_is_refused_naming_it(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StreamError, match=f"port {port} on 127.0.0.1 is in use: choose another port"):
            broker.start_local_broker(port=port)


def test_only_one_or_three_nodes():
    with pytest.raises(StreamError, match="1 or 3 nodes, not 2"):
        broker.start_local_broker(nodes=2)


def test_a_cluster_id_never_starts_with_a_dash():
    """Kafka's storage tool takes ``-t -abc…`` for a missing value, so such an id is drawn again (a run of the suite
    failed at its start on one, one time in 64)."""
    draws = iter([bytes([0xF8]) + bytes(15), bytes(16)])  # base64 "-A…" first, then "AAAA…"
    cluster_id = broker._cluster_id(lambda: next(draws))
    assert cluster_id == "A" * 22
    assert broker._cluster_id() and not broker._cluster_id().startswith("-")


def test_a_free_port_for_a_server_is_below_the_kernels_ephemeral_range():
    """Ports the kernel hands out (bind(0), outgoing connections) come from its ephemeral range: a server's port
    chosen there could be taken by any process before the server binds it."""
    low, _high = broker._ephemeral_ports()
    ports = {broker.free_port() for _ in range(20)}
    assert all(broker.LOWEST_SERVER_PORT <= port < low for port in ports), ports
    with socket.socket() as held:
        held.bind(("127.0.0.1", min(ports)))
        assert not broker._port_free(min(ports))
