"""The ``kafka`` connection, read the way the Apache Kafka provider's hooks read it.

``StreamKafkaHook`` is the provider's ``KafkaBaseHook``: the connection's extra is the librdkafka
configuration; callbacks named by dotted path are resolved only when ``[apache_kafka] callback_allowlist``
lists them; Amazon MSK IAM and Google Managed Kafka get their OAuth token callback. The control plane's
clients (verify, reset, the watchdog's lag, the health gate) use that configuration as it is. A Spark driver
gets its settings as JSON in its environment, where no callable can travel: a configuration with a callback
is refused for a driver, naming the callbacks.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from airflow_kafka_stream.errors import InvalidInputError, StreamError

# Lazy imports: kafka.metadata waits for a topic to list: every operator imports this hook while Airflow parses
# its DAG file.

#: confluent-kafka options whose values are callables.
CALLBACK_KEYS = ("error_cb", "throttle_cb", "stats_cb", "log_cb", "oauth_cb", "on_commit", "on_delivery")


class StreamKafkaHook(KafkaBaseHook):
    """The librdkafka configuration of a ``kafka`` connection, for the control plane and for a driver.

    :param kafka_config_id: the ``kafka`` connection (its extra holds the librdkafka configuration).
    """

    hook_name = "Apache Kafka (streaming jobs)"

    def client_config(self) -> dict[str, Any]:
        """The configuration the control plane's clients use (secrets included: never log it); ``group.id`` is
        dropped: a group belongs to a job (job.json), not to a connection several jobs share."""
        try:
            config = dict(self._build_config())
        except ValueError as exc:
            if "bootstrap.servers" in str(exc):
                raise InvalidInputError(
                    f"connection {self.kafka_config_id!r} has no 'bootstrap.servers' in its extra; set its extra to "
                    'the librdkafka configuration, e.g. {"bootstrap.servers": "broker:9092"}',
                    setting="kafka_conn_id") from None
            raise InvalidInputError(f"connection {self.kafka_config_id!r}: {exc}", setting="kafka_conn_id") from None
        config.pop("group.id", None)
        return config

    def driver_config(self) -> dict[str, Any]:
        """The configuration a Spark driver gets in its environment: text only, so no callback."""
        config = self.client_config()
        callbacks = sorted(key for key, value in config.items() if key in CALLBACK_KEYS or callable(value))
        if callbacks:
            raise InvalidInputError(
                f"connection {self.kafka_config_id!r} sets {', '.join(callbacks)}: a callback cannot reach a Spark "
                "driver (its settings travel as JSON in its environment); use settings librdkafka reads itself "
                "(e.g. sasl.oauthbearer.method=oidc) for the job's connection", setting="kafka_conn_id")
        return config

    def test_connection(self) -> tuple[bool, str]:
        """Whether the brokers answer with this configuration (the message names what failed)."""
        from airflow_kafka_stream.kafka.metadata import list_topic_partitions

        try:
            found = list_topic_partitions(self.client_config(), timeout=10)
        except StreamError as exc:
            return False, str(exc)
        return True, f"the Kafka brokers answer ({len(found)} topics)"
