"""airflow-kafka-stream: operate Spark Structured Streaming jobs that read Kafka, from Airflow."""

from __future__ import annotations

__version__ = "0.1.0"

_PACKAGE = "airflow_kafka_stream"


def get_provider_info() -> dict:
    """Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point.

    No connection type of its own: Kafka settings come from the ``kafka`` connection, Spark
    submission from the ``spark`` connection, storage credentials from any connection holding
    fsspec storage options.
    """
    integration = "Spark streaming jobs reading Kafka"
    return {
        "package-name": "airflow-kafka-stream",
        "name": "Kafka Streams on Spark",
        "description": "Run, stop, savepoint, restore, upgrade, reset, verify and watch Spark streaming jobs that "
                       "read Kafka.",
        "versions": [__version__],
        "integrations": [{"integration-name": integration, "how-to-guide": [
            f"docs/{page}.md" for page in ("airflow", "python-api", "savepoints", "reset", "verify", "runtime",
                                           "source", "job-home", "checkpoint")],
                          "tags": ["apache", "software"]}],
        "hooks": [{"integration-name": integration, "python-modules": [f"{_PACKAGE}.hooks.stream_job"]}],
        "operators": [{"integration-name": integration, "python-modules": [
            f"{_PACKAGE}.operators.{name}" for name in ("submit", "stop", "savepoints", "upgrade", "verify", "reset",
                                                         "watchdog")]}],
        "sensors": [{"integration-name": integration, "python-modules": [
            f"{_PACKAGE}.sensors.job_state", f"{_PACKAGE}.sensors.health", f"{_PACKAGE}.sensors.group_sync"]}],
        "triggers": [{"integration-name": integration, "python-modules": [
            f"{_PACKAGE}.triggers.job_state", f"{_PACKAGE}.triggers.health", f"{_PACKAGE}.triggers.group_sync"]}],
        "extra-links": [f"{_PACKAGE}.links.job_page.StreamJobPageLink"],
    }
