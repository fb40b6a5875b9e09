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
                                           "source", "job-home", "checkpoint", "standby", "upgrade-check")],
                          "tags": ["apache", "software"]}],
        "hooks": [{"integration-name": integration, "python-modules": [
            f"{_PACKAGE}.hooks.{name}" for name in ("stream_job", "kafka", "job_home", "spark_driver")]}],
        "operators": [{"integration-name": integration, "python-modules": [
            f"{_PACKAGE}.operators.{name}" for name in ("submit", "stop", "savepoints", "upgrade", "upgrade_check",
                                                         "verify", "reset", "watchdog", "supervisor")]}],
        "sensors": [{"integration-name": integration, "python-modules": [
            f"{_PACKAGE}.sensors.job_state", f"{_PACKAGE}.sensors.health", f"{_PACKAGE}.sensors.group_sync",
            f"{_PACKAGE}.sensors.lag_objective"]}],
        "triggers": [{"integration-name": integration, "python-modules": [
            f"{_PACKAGE}.triggers.{name}" for name in ("job_state", "health", "group_sync", "standby", "supervisor",
                                                         "lag_objective")]}],
        "extra-links": [f"{_PACKAGE}.links.job_page.StreamJobPageLink"],
        "config": {_PACKAGE: {"description": "Defaults of this provider's operators.", "options": {
            "executor_environment": _option(
                "The executors' Python environment on a cluster when an operator does not say: packed, the path "
                "or URL of a packed archive, or python:/path/bin/python installed on every node (empty: Spark's "
                "own setting).", "string", "packed", ""),
            "defer_after_seconds": _option(
                "Seconds a deferrable stop, submit or standby waits in its worker slot before it defers: most "
                "drains and handovers end within them, without a defer and resume (0 defers after one look).",
                "float", "10", "30"),
        }}},
    }


def _option(description: str, kind: str, example: str, default: str) -> dict:
    return {"description": description, "version_added": "0.1.0", "type": kind, "example": example,
            "default": default}
