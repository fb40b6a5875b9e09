"""Which jars of Spark's own Kafka connector (``format("kafka")``, ``spark-sql-kafka-0-10``) a driver gets.

A job reads with this project's source, but Spark's connector is what a batch function writes to Kafka with
(``batch_df.write.format("kafka")``) and what a job that reads with ``format("kafka")`` needs. The driver's class
loader must have it when the driver starts (``spark.jars`` given to spark-submit): set on a session that is already
running, executors get it but the driver's data source lookup does not, and Spark answers
``KAFKA_DATA_SOURCE_NOT_ENABLED``. Jars are never downloaded at run time (``spark.jars.packages`` needs the network
from every driver); the ones ``jvm/spark-kafka/pom.xml`` pins are installed beside this environment.

The choice is recorded in a submission, so a replay (a rollback, a watchdog restart, a standby) chooses the same;
the jars themselves are found again on the host that launches, where they may live at another path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from airflow_kafka_stream.errors import InvalidInputError

#: The artifact whose jar makes ``format("kafka")`` available.
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10"
#: The Spark settings that can already bring the connector (a user's cluster that has it).
CONNECTOR_SETTINGS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")
#: How the jars that the project pins are installed, and how to point at another folder holding them.
INSTALL_HINT = "install them with scripts/setup-jvm, or name a folder holding them in AKS_SPARK_KAFKA_JARS"


class KafkaConnector(StrEnum):
    """Where a driver's copy of Spark's Kafka connector comes from."""

    #: The installed jars, unless the Spark settings or the Spark installation already bring the connector.
    AUTO = "auto"
    #: Always the installed jars; refused when they are not installed.
    BUNDLED = "bundled"
    #: Never the installed jars: the cluster, its image or the Spark settings provide the connector.
    PROVIDED = "provided"

    @classmethod
    def of(cls, value: object) -> KafkaConnector:
        """A choice from a setting (None or empty: :attr:`AUTO`); refuses any other word, naming the three."""
        if value is None or str(value).strip() == "":
            return cls.AUTO
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InvalidInputError(
                f"kafka_connector {value!r} is not one of {', '.join(choice.value for choice in cls)}: auto adds "
                "the installed jars of Spark's Kafka connector unless Spark already has them, bundled always adds "
                "them, provided never does", setting="kafka_connector") from None


def names_connector(spark_conf: Mapping[str, str], installed_spark_jars: Sequence[str] = ()) -> str | None:
    """The setting (or the Spark installation) that already brings the connector, or None."""
    for key in CONNECTOR_SETTINGS:
        if CONNECTOR_ARTIFACT in str(spark_conf.get(key) or ""):
            return key
    if any(CONNECTOR_ARTIFACT in jar.rsplit("/", 1)[-1] for jar in installed_spark_jars):
        return "the Spark installation's jars"
    return None


def connector_jars(choice: KafkaConnector | str | None, spark_conf: Mapping[str, str], bundled: Sequence[str],
                   installed_spark_jars: Sequence[str] = (), *, driver_in_container: bool = False) -> list[str]:
    """The jars a launch adds for ``choice``: ``bundled`` (the installed ones) or none.

    ``installed_spark_jars`` are the jars of the Spark that launches (its ``jars/`` folder); a driver that a
    Kubernetes cluster starts (``driver_in_container``) cannot read this machine's files, so ``auto`` leaves the
    connector to its image there, and ``bundled`` is refused.
    """
    choice = KafkaConnector.of(choice)
    if choice is KafkaConnector.PROVIDED:
        return []
    if choice is KafkaConnector.AUTO:
        if driver_in_container or names_connector(spark_conf, installed_spark_jars):
            return []
        return list(bundled)
    if driver_in_container:
        raise InvalidInputError("kafka_connector bundled: a driver that Kubernetes starts in cluster mode cannot "
                                "read this machine's jars; build the connector into its image and use provided",
                                setting="kafka_connector")
    if not bundled:
        raise InvalidInputError(f"kafka_connector bundled: the jars of Spark's Kafka connector ({CONNECTOR_ARTIFACT}) "
                                f"are not installed here; {INSTALL_HINT}, or use provided where Spark has them",
                                setting="kafka_connector")
    return list(bundled)


def with_jars(spark_conf: Mapping[str, str], jars: Sequence[str]) -> dict[str, str]:
    """``spark_conf`` with ``jars`` added to ``spark.jars`` after the user's own (spark-submit's ``--jars`` would
    replace them): one setting, which both spark-submit and the Spark provider's hook pass on."""
    conf = dict(spark_conf)
    if jars:
        given = [jar for jar in str(conf.get("spark.jars") or "").split(",") if jar.strip()]
        conf["spark.jars"] = ",".join([*given, *(jar for jar in jars if jar not in given)])
    return conf
