"""A job's source options in the terms of Spark's own Kafka connector: mapped, or refused with the option named."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.spark_kafka_options import connector_options, java_client_settings
from airflow_kafka_stream.errors import InvalidInputError

BASE = {"kafka.bootstrap.servers": "b:9092", "subscribe": "orders", "startingOffsets": "group", "groupId": "g"}


def test_a_fresh_start_is_handed_over_as_offsets_and_the_start_options_are_consumed():
    found = connector_options({**BASE, "startingOffsetsGroupFallback": "latest"}, {"orders": {"0": 7, "1": 0}})
    assert found == {"kafka.bootstrap.servers": "b:9092", "subscribe": "orders",
                     "startingOffsets": '{"orders":{"0":7,"1":0}}'}


def test_a_restart_on_a_checkpoint_names_no_start():
    assert connector_options(BASE, None)["startingOffsets"] == "earliest"


def test_options_of_the_connector_pass_and_settings_it_manages_are_left_out():
    found = connector_options({**BASE, "maxOffsetsPerTrigger": "500", "minOffsetsPerTrigger": "10",
                               "failOnDataLoss": "false", "kafka.group.id": "mine",
                               "kafka.enable.auto.commit": "true", "kafka.isolation.level": "read_committed"},
                              None)
    assert {k: found[k] for k in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "failOnDataLoss",
                                  "kafka.isolation.level")} == {
        "maxOffsetsPerTrigger": "500", "minOffsetsPerTrigger": "10", "failOnDataLoss": "false",
        "kafka.isolation.level": "read_committed"}
    assert "kafka.group.id" not in found and "kafka.enable.auto.commit" not in found


def test_options_only_kafka_stream_has_are_refused_each_named_with_the_way_out():
    with pytest.raises(InvalidInputError) as refused:
        connector_options({**BASE, "readMode": "auto", "kafkaConsumer.cache": "true"}, None)
    text = str(refused.value)
    assert "readMode (Spark's connector always reads on the executors" in text
    assert "kafkaConsumer.cache (" in text and "spark.kafka.consumer.cache.capacity" in text


@pytest.mark.parametrize(("mechanism", "module"), [
    ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
    ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
])
def test_a_librdkafka_login_becomes_a_jaas_login(mechanism, module):
    found = java_client_settings({"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
                                  "sasl.username": "svc", "sasl.password": 'p"w\\d', "ssl.ca.location": "/ca.pem"})
    assert found == {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                     "sasl.jaas.config": f'{module} required username="svc" password="p\\"w\\\\d";',
                     "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}


def test_settings_the_java_client_cannot_take_are_refused_naming_the_setting():
    with pytest.raises(InvalidInputError, match="no Java login for sasl.mechanism OAUTHBEARER.*\\(sasl.mechanism\\)"):
        java_client_settings({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u", "sasl.password": "p"})
    with pytest.raises(InvalidInputError, match="ssl.certificate.location .*PKCS#12 keystore"):
        java_client_settings({"ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem"})


def test_endpoint_checks_off_and_a_pkcs12_keystore_in_java_terms():
    found = java_client_settings({"ssl.endpoint.identification.algorithm": "none",
                                  "ssl.keystore.location": "/client.p12", "ssl.keystore.password": "x"})
    assert found == {"ssl.endpoint.identification.algorithm": "", "ssl.keystore.location": "/client.p12",
                     "ssl.keystore.password": "x", "ssl.keystore.type": "PKCS12"}
