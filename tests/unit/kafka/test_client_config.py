"""Client settings are checked by librdkafka itself before any operation: each refusal names the setting
and how to write it for this client, and never repeats a secret."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.clients import check_client_config

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="jaas-s3cret";')


@pytest.mark.parametrize(
    ("config", "needles"),
    [
        pytest.param({"sasl.jaas.config": JAAS}, ["'sasl.jaas.config'", "sasl.username", "sasl.password",
                                                  "sasl.mechanism"],
                     id="1-a-java-jaas-line-says-how-to-write-the-login-for-librdkafka"),
        pytest.param({"security.protocol": "SASL_SSLX"}, ["'security.protocol'", "SASL_SSLX"],
                     id="2-an-invalid-value-names-setting-and-value"),
        pytest.param({"ssl.truststore.location": "/etc/kafka/truststore.jks", "ssl.truststore.password": "tp-s3cret"},
                     ["'ssl.truststore.location'", "'ssl.truststore.password'", "ssl.ca.location"],
                     id="3-java-truststore-settings-point-to-ssl-ca-location"),
        pytest.param({"ssl.keystore.type": "JKS"}, ["'ssl.keystore.type'", "PKCS#12"],
                     id="4-a-jks-keystore-is-converted-to-pkcs12"),
        pytest.param({"key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer"},
                     ["'key.deserializer'", "Java class"], id="5-java-deserializer-classes-are-not-settings"),
        pytest.param({"no.such.setting": "1"}, ["'no.such.setting'", "CONFIGURATION.md"],
                     id="6-an-unknown-name-points-to-librdkafkas-list"),
        pytest.param({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.password": "pw-s3cret"},
                     ["sasl.username and sasl.password must be set"],
                     id="7-a-combination-librdkafka-refuses-at-creation-is-refused-too"),
        pytest.param({"security.protocol": "pw-s3cret", "sasl.password": "pw-s3cret"},
                     ["'security.protocol'", 'Invalid value "***"'], id="8-a-secret-quoted-by-librdkafka-is-masked"),
    ],
)
def test_refused_with_the_setting_named_and_no_secret(config, needles):
    with pytest.raises(InvalidInputError) as info:
        check_client_config({"bootstrap.servers": "broker:9092", **config})
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    for secret in ("jaas-s3cret", "tp-s3cret", "pw-s3cret"):
        assert secret not in message


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"bootstrap.servers": "broker:9092"}, id="1-plaintext"),
        pytest.param({"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.username": "u", "sasl.password": "p", "group.id": "g", "auto.offset.reset": "earliest"},
                     id="2-sasl-with-credentials-and-consumer-settings"),
        pytest.param({}, id="3-nothing-given"),
    ],
)
def test_accepted(config):
    """What the check accepts, librdkafka accepts too: the clients the operations build from it are made."""
    from airflow_kafka_stream.kafka.clients import admin_client, consumer

    assert check_client_config(config) is None
    # Brokers nobody listens on: a client is made without a connection, as the check makes its probe.
    probe = {**config, "bootstrap.servers": "127.0.0.1:9"}
    assert admin_client(probe) is not None
    made = consumer({**probe, "group.id": probe.get("group.id", "check")})
    try:
        assert made.assignment() == [], "a consumer made from accepted settings that reads nothing yet"
    finally:
        made.close()


def test_the_job_runtime_refuses_the_same_settings_at_start():
    from airflow_kafka_stream.runtime import StreamConfig

    config = StreamConfig(job_name="orders", bootstrap_servers="broker:9092", group_id="orders", topics=["orders"],
                          kafka_options={"sasl.jaas.config": JAAS})
    with pytest.raises(InvalidInputError, match="sasl.username") as info:
        config.validate()
    assert "jaas-s3cret" not in str(info.value)
