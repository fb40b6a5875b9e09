"""Which jars of Spark's Kafka connector a launch adds: a table of every choice against what Spark already has."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.kafka_connector import KafkaConnector, connector_jars, names_connector, with_jars
from airflow_kafka_stream.errors import InvalidInputError

BUNDLED = ["/env/jvm/spark-kafka/spark-sql-kafka-0-10_2.13-4.2.0.jar", "/env/jvm/spark-kafka/kafka-clients-3.9.2.jar"]
SPARK_JARS = ["/opt/spark/jars/spark-core_2.13-4.2.0.jar"]
THEIRS = {"spark.jars": "/opt/jars/spark-sql-kafka-0-10_2.13-4.2.0.jar"}


@pytest.mark.parametrize(("choice", "conf", "installed", "in_container", "expected"), [
    (None, {}, SPARK_JARS, False, BUNDLED),
    ("auto", {}, SPARK_JARS, False, BUNDLED),
    ("auto", THEIRS, SPARK_JARS, False, []),
    ("auto", {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}, SPARK_JARS, False, []),
    ("auto", {}, [*SPARK_JARS, "/opt/spark/jars/spark-sql-kafka-0-10_2.13-4.2.0.jar"], False, []),
    ("auto", {}, SPARK_JARS, True, []),
    ("bundled", THEIRS, SPARK_JARS, False, BUNDLED),
    ("provided", {}, SPARK_JARS, False, []),
    ("PROVIDED", {}, SPARK_JARS, False, []),
])
def test_each_choice_adds_the_installed_jars_only_where_spark_lacks_them(choice, conf, installed, in_container,
                                                                          expected):
    assert connector_jars(choice, conf, BUNDLED, installed, driver_in_container=in_container) == expected


def test_auto_without_installed_jars_adds_none_and_bundled_is_refused_with_the_way_out():
    assert connector_jars("auto", {}, [], SPARK_JARS) == []
    with pytest.raises(InvalidInputError, match="not installed here; install them with scripts/setup-jvm") as refused:
        connector_jars("bundled", {}, [], SPARK_JARS)
    assert refused.value.setting == "kafka_connector"
    with pytest.raises(InvalidInputError, match="Kubernetes.*use provided"):
        connector_jars("bundled", {}, BUNDLED, SPARK_JARS, driver_in_container=True)


def test_an_unknown_choice_is_refused_naming_the_three():
    with pytest.raises(InvalidInputError, match="'maven' is not one of auto, bundled, provided") as refused:
        KafkaConnector.of("maven")
    assert refused.value.setting == "kafka_connector"
    assert KafkaConnector.of("") is KafkaConnector.AUTO


def test_the_jars_follow_the_users_own_and_none_twice():
    conf = with_jars({"spark.jars": "/apps/udfs.jar", "spark.executor.memory": "2g"}, ["/apps/udfs.jar", *BUNDLED])
    assert conf == {"spark.jars": ",".join(["/apps/udfs.jar", *BUNDLED]), "spark.executor.memory": "2g"}
    assert with_jars({"spark.executor.memory": "2g"}, []) == {"spark.executor.memory": "2g"}


def test_the_setting_that_already_brings_the_connector_is_named():
    assert names_connector(THEIRS) == "spark.jars"
    assert names_connector({"spark.driver.extraClassPath": "/x/spark-sql-kafka-0-10_2.13.jar"}) == \
        "spark.driver.extraClassPath"
    assert names_connector({}, SPARK_JARS) is None
