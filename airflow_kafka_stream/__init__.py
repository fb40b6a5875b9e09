"""airflow-kafka-stream: operate Spark Structured Streaming jobs that read Kafka, from Airflow."""

from __future__ import annotations

__version__ = "0.1.0"


def get_provider_info() -> dict:
    """Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point."""
    return {
        "package-name": "airflow-kafka-stream",
        "name": "Kafka Streams on Spark",
        "description": "Run, stop, savepoint, restore, reset and verify Spark streaming jobs that read Kafka.",
        "versions": [__version__],
    }
