"""Build confluent-kafka clients for the control plane from a client config dict.

librdkafka logs every failed connection attempt to stderr; the control plane
reports failures as exceptions with a message that says what to do, so its
clients only log critical events unless the config asks for more
(``log_level``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from airflow_kafka_stream.errors import InvalidInputError

#: librdkafka syslog level: 2 = critical only.
QUIET_LOG_LEVEL = 2


def bootstrap_servers(config: Mapping[str, object]) -> str:
    """The config's bootstrap servers; InvalidInputError when missing."""
    servers = config.get("bootstrap.servers")
    if not servers:
        raise InvalidInputError(
            "config['bootstrap.servers'] must be provided (the Kafka brokers to connect to, e.g. 'host:9092')"
        )
    return str(servers)


def client_settings(config: Mapping[str, object], **overrides: Any) -> dict[str, Any]:
    """The config with quiet logging by default and the given overrides applied."""
    bootstrap_servers(config)
    settings: dict[str, Any] = {"log_level": QUIET_LOG_LEVEL}
    settings.update(config)
    settings.update(overrides)
    return settings


def admin_client(config: Mapping[str, object]) -> AdminClient:
    return AdminClient(client_settings(config))


def consumer(config: Mapping[str, object], **overrides: Any) -> Consumer:
    return Consumer(client_settings(config, **overrides))
