"""Where the JVM jars this project pins are installed, and which jars the Spark that launches drivers has.

``scripts/setup-jvm`` copies each pom's artifacts under ``jvm/`` into ``<environment>/jvm/<pom>``: Spark's own Kafka
connector (``spark-kafka``) and the Apache Kafka broker with its tools (``kafka-broker``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

#: Names a folder holding the jars of Spark's Kafka connector, instead of the installed ones.
SPARK_KAFKA_JARS_ENV = "AKS_SPARK_KAFKA_JARS"


def jvm_jars_folder(pom: str, env_var: str) -> Path:
    """Where scripts/setup-jvm copies the jars that ``jvm/<pom>/pom.xml`` pins (``<environment>/jvm/<pom>``), or
    the folder the environment variable ``env_var`` names instead."""
    return Path(os.environ.get(env_var) or Path(sys.prefix) / "jvm" / pom)


def spark_kafka_jars() -> list[str]:
    """The jars of Spark's own Kafka connector (``format("kafka")``) installed beside this environment, or none."""
    folder = jvm_jars_folder("spark-kafka", SPARK_KAFKA_JARS_ENV)
    return sorted(str(jar) for jar in folder.glob("*.jar")) if folder.is_dir() else []


def spark_installation_jars() -> list[str]:
    """The jars of the Spark that launches drivers: ``$SPARK_HOME/jars``, else pyspark's own (found without
    importing it). A Spark distribution that ships the connector there needs no second copy."""
    home = os.environ.get("SPARK_HOME")
    if home:
        folder = Path(home) / "jars"
    else:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or not spec.submodule_search_locations:
            return []
        folder = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return sorted(str(jar) for jar in folder.glob("*.jar")) if folder.is_dir() else []
