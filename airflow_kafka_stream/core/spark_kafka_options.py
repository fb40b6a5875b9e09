"""A job's source options in the terms of Spark's own Kafka connector (``format("kafka")``).

A job is configured once, in this project's terms: the ``kafka_stream`` source's options (Spark's names, plus a
few of its own) and librdkafka's client settings (what the group committer, the CLI and the control plane use).
A job that reads with Spark's connector gets the same choices in the connector's terms:

* where a fresh start begins is resolved by the runtime (the same resolution ``kafka_stream`` uses, so
  ``startingOffsets=group`` and the timestamp forms mean the same for both) and handed over as offsets JSON;
* options only ``kafka_stream`` has are refused, each named with what to do instead: never silently dropped;
* librdkafka's client settings become the Java client's (``sasl.username``/``sasl.password`` become a JAAS
  login, a PEM CA file a PEM truststore); settings the connector manages itself are left out, as it refuses them.

Pure: no Spark, no Kafka.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from airflow_kafka_stream.errors import InvalidInputError

#: The sources a job reads with: this project's, and Spark's own connector (``spark-sql-kafka-0-10``).
KAFKA_STREAM_FORMAT = "kafka_stream"
SPARK_KAFKA_FORMAT = "kafka"
SOURCE_FORMATS = (KAFKA_STREAM_FORMAT, SPARK_KAFKA_FORMAT)

#: The start a standby's connector query is defined with: it names no partition the job reads, so a start the
#: runtime did not seed in the checkpoint (``checkpoint.initial_offsets.write_initial_offsets``) fails at once
#: instead of reading from a place nobody chose.
UNSEEDED_START = '{"airflow-kafka-stream.start-not-seeded":{"0":-2}}'


def check_source_format(value: object, name: str = "source") -> None:
    """Refuse a source that is neither of :data:`SOURCE_FORMATS`, naming both and ``name``, where it was given (the
    ``source`` setting: ``--source``, the operators' ``source``)."""
    if value not in SOURCE_FORMATS:
        raise InvalidInputError(f"{name} {value!r} is not one of {', '.join(SOURCE_FORMATS)}: kafka_stream is this "
                                "project's source, kafka Spark's own connector", setting="source")

#: Options only ``kafka_stream`` reads, with what a job on Spark's connector does instead.
KAFKA_STREAM_ONLY = {
    "readmode": "Spark's connector always reads on the executors; remove readMode",
    "driverreadmaxrecords": "Spark's connector always reads on the executors; remove driverReadMaxRecords",
    "driverreadmaxbytes": "Spark's connector always reads on the executors; remove driverReadMaxBytes",
    "minrecordspertask": "Spark's connector reads a task per partition; use minPartitions to split further",
    "idlepollintervalms": "Spark's connector looks at the topics on every trigger; pace it with the trigger "
                          "interval instead",
    "kafkaconsumer.nativereader": "Spark's connector reads with the Java client; remove kafkaConsumer.nativeReader",
    "kafkaconsumer.cache": "Spark's connector keeps its consumers (spark.kafka.consumer.cache.capacity); remove "
                           "kafkaConsumer.cache",
    "kafkaconsumer.cachetimeoutms": "set spark.kafka.consumer.cache.timeout instead",
    "kafkaconsumer.allowpythonfallback": "Spark's connector has no Python reader; remove "
                                         "kafkaConsumer.allowPythonFallback",
    "drainpath": "the runtime sets it for kafka_stream only; remove it",
    "startoffsetspath": "the runtime records a fresh start itself; remove it",
    "bindingpath": "the runtime sets it for kafka_stream only; remove it",
    "rehearsalendoffsets": "the runtime sets it for kafka_stream only; remove it",
}

#: Options about where a fresh start begins: the runtime resolves them and hands the connector offsets JSON.
START_OPTIONS = ("startingoffsets", "startingoffsetsgroupfallback", "groupid", "startingoffsetsbytimestamp",
                 "startingtimestamp", "startingoffsetsbytimestampstrategy")

#: Client settings the connector manages itself (it refuses them), left out of its ``kafka.*`` options.
CONNECTOR_MANAGED = ("group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                     "value.deserializer", "enable.partition.eof")

#: librdkafka settings with another name in the Java client.
_RENAMED = {"sasl.mechanisms": "sasl.mechanism"}

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_client_settings(librdkafka: Mapping[str, object]) -> dict[str, str]:
    """The Java client's settings for librdkafka's ``librdkafka`` (values as strings)."""
    settings = {_RENAMED.get(key, key): str(value) for key, value in librdkafka.items()
                if key not in CONNECTOR_MANAGED}
    username, password = settings.pop("sasl.username", None), settings.pop("sasl.password", None)
    if username is not None or password is not None:
        mechanism = settings.get("sasl.mechanism", "PLAIN").upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise InvalidInputError(
                f"sasl.username and sasl.password have no Java login for sasl.mechanism {mechanism}: a job reading "
                "with Spark's Kafka connector logs in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (sasl.mechanism)",
                setting="command_config")
        settings["sasl.jaas.config"] = (f"{module} required username={_quoted(username or '')} "
                                        f"password={_quoted(password or '')};")
    ca = settings.pop("ssl.ca.location", None)
    if ca is not None:
        settings.setdefault("ssl.truststore.type", "PEM")
        settings.setdefault("ssl.truststore.location", ca)
    if settings.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        settings["ssl.endpoint.identification.algorithm"] = ""
    if "ssl.keystore.location" in settings and settings["ssl.keystore.location"].lower().endswith((".p12", ".pfx")):
        settings.setdefault("ssl.keystore.type", "PKCS12")
    for key in ("ssl.certificate.location", "ssl.key.location"):
        if key in settings:
            raise InvalidInputError(
                f"{key} (PEM files) has no setting of the Java client that Spark's Kafka connector reads with: give "
                "the client certificate as a PKCS#12 keystore (ssl.keystore.location=FILE.p12, "
                "ssl.keystore.password), which both clients read", setting="command_config")
    return settings


def _quoted(value: str) -> str:
    """A JAAS option value: double-quoted, with quotes and backslashes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def librdkafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    """The Kafka client settings among a job's source options (its ``kafka.*`` options, without the prefix)."""
    return {name[len("kafka."):]: value for name, value in options.items() if name.lower().startswith("kafka.")}


def connector_options(options: Mapping[str, str], start: Mapping[str, Mapping[str, int]] | None, *,
                      seeded: bool = False) -> dict[str, str]:
    """``format("kafka")`` options for a job whose ``kafka_stream`` options are ``options``.

    ``start``: where a fresh start begins (nested offsets, resolved by the runtime), or None when the checkpoint
    already holds a position (Spark then ignores where a start would begin). ``seeded``: every start of this
    DataFrame finds its start in its checkpoint (a standby's, defined before it knows its run), so the option is
    :data:`UNSEEDED_START`. Refuses options only ``kafka_stream`` has, naming each with what to do instead.
    """
    refused = [f"{name} ({KAFKA_STREAM_ONLY[name.lower()]})" for name in options
               if name.lower() in KAFKA_STREAM_ONLY]
    if refused:
        raise InvalidInputError(
            "source option(s) that Spark's Kafka connector does not have, so a job reading with format(\"kafka\") "
            f"cannot keep them: {'; '.join(refused)}")
    found = {f"kafka.{key}": value for key, value in java_client_settings(librdkafka_settings(options)).items()}
    for name, value in options.items():
        lowered = name.lower()
        if not lowered.startswith("kafka.") and lowered not in START_OPTIONS:
            found[name] = str(value)
    found["startingOffsets"] = UNSEEDED_START if seeded else (
        json.dumps(start, sort_keys=True, separators=(",", ":")) if start else "earliest")
    return found
