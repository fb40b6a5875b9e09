"""Build confluent-kafka clients for the control plane from a client config dict.

librdkafka logs every failed connection attempt to stderr; the control plane
reports failures as exceptions with a message that says what to do, so its
clients only log critical events unless the config asks for more
(``log_level``).

:func:`check_client_config` asks librdkafka itself whether it takes a config,
so no list of valid settings is kept here; only the Java client's settings,
which users copy from Kafka's own tools, get a hint on how to write them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException
from confluent_kafka.admin import AdminClient

from airflow_kafka_stream.core.redaction import redact_text, secret_values
from airflow_kafka_stream.errors import InvalidInputError

#: The group id of offset-lookup consumers when the config names none: they never join or commit it.
LOOKUP_GROUP = "airflow-kafka-stream-offset-lookup"
#: librdkafka syslog level: 2 = critical only.
QUIET_LOG_LEVEL = 2

LIBRDKAFKA_SETTINGS = "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"

#: How to write a Java client setting for librdkafka (keyed by the setting or its prefix).
_JAVA_HINTS = {
    "sasl.jaas.config": "write the login as separate settings instead: sasl.mechanism=PLAIN (or SCRAM-SHA-256, "
                        "SCRAM-SHA-512), sasl.username=USER and sasl.password=PASSWORD",
    "ssl.truststore.": "librdkafka reads no Java truststore: set ssl.ca.location to the CA certificate as a PEM "
                       "file (keytool -exportcert -rfc writes it from the truststore)",
    "ssl.keystore.type": "librdkafka reads a PKCS#12 keystore (ssl.keystore.location=FILE.p12 and "
                         "ssl.keystore.password) or PEM files (ssl.certificate.location, ssl.key.location); "
                         "convert a JKS keystore with keytool -importkeystore -deststoretype PKCS12",
    "key.deserializer": "a Java class; remove it (this client reads raw bytes)",
    "value.deserializer": "a Java class; remove it (this client reads raw bytes)",
    "key.serializer": "a Java class; remove it",
    "value.serializer": "a Java class; remove it",
}


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


def isolation_level(config: Mapping[str, object]) -> IsolationLevel:
    """The isolation level the client config reads at: "latest" is the last stable offset under
    read_committed (records of open transactions are not readable yet), else the high watermark."""
    committed = str(config.get("isolation.level", "")).strip().lower() == "read_committed"
    return IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED


def lookup_consumer(config: Mapping[str, object]) -> Consumer:
    """A consumer that only looks up offsets (ListOffsets through ``offsets_for_times``): it never subscribes,
    commits or fetches, and asks at the config's isolation level.

    Not the admin client's ``list_offsets``: while a partition's leader is down (until the controller moves the
    leadership, seconds), librdkafka's admin request retries without pause for its whole timeout, a core per
    asking client (measured: 4.9 s of CPU in a 5 s call, librdkafka 2.16), which starved a driver's heartbeat on
    two cores. The consumer's lookup waits for the answer without using the CPU (it times out, or answers
    "leader not available"), and is asked again with backoff.
    """
    level = "read_committed" if isolation_level(config) == IsolationLevel.READ_COMMITTED else "read_uncommitted"
    settings = {key: value for key, value in config.items() if not str(key).startswith("group.instance")}
    settings.setdefault("group.id", LOOKUP_GROUP)
    return consumer(settings, **{"enable.auto.commit": False, "isolation.level": level})


def check_client_config(config: Mapping[str, object]) -> None:
    """Refuse a client config librdkafka would not take, naming each setting and its fix; secrets masked.

    Creating a client validates every setting (unknown names, invalid values,
    Java-only settings, unreadable certificate files, missing SASL credentials)
    without network traffic, because the probe is given no brokers.
    """
    reason = _probe(config)
    if reason is None:
        return
    secrets = secret_values(dict(config))
    # A setting refused on its own is one to name; a failure only at client creation
    # (e.g. SASL without credentials) comes from the combination.
    refused = {str(key): alone for key, alone in ((key, _probe({key: value})) for key, value in config.items())
               if alone is not None and not alone.startswith("Failed to create")}
    if not refused:
        raise InvalidInputError(f"the Kafka client settings are refused by librdkafka: {_clean(reason, secrets)}; "
                                f"fix them (see {LIBRDKAFKA_SETTINGS})")
    parts = [f"{setting!r} ({_clean(why, secrets)}): {_fix(setting)}" for setting, why in refused.items()]
    noun = "setting" if len(parts) == 1 else "settings"
    raise InvalidInputError(f"Kafka client {noun} refused by librdkafka: " + "; ".join(parts))


def _clean(reason: str, secrets: list[str]) -> str:
    return redact_text(reason.removeprefix("Failed to create admin client: ").rstrip("."), secrets)


def _fix(setting: str) -> str:
    hint = next((text for key, text in _JAVA_HINTS.items()
                 if setting == key or (key.endswith(".") and setting.startswith(key))), None)
    if hint:
        return f"it is a Java client setting; {hint}"
    return f"fix or remove it (the settings librdkafka takes: {LIBRDKAFKA_SETTINGS})"


def _probe(config: Mapping[str, object]) -> str | None:
    """librdkafka's reason for refusing the config, or None when it creates a client with it."""
    settings = {"log_level": QUIET_LOG_LEVEL, **{k: v for k, v in config.items() if k != "bootstrap.servers"}}
    try:
        client = AdminClient(settings)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        return error.str() if hasattr(error, "str") else str(exc)
    except (TypeError, ValueError) as exc:  # confluent-kafka's own checks (e.g. a callback that is not callable)
        return str(exc)
    del client
    return None
