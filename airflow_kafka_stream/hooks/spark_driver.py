"""Airflow's launcher: the driver's spark-submit command built by the Spark provider's SparkSubmitHook.

The plan (where the driver runs, what it ships, its secret environment) is ``ops.spark_submit``'s, the same
as the command line's launcher; only the command comes from the ``spark`` connection through the hook:

* client mode: ``SparkSubmitHook.submit`` would wait for spark-submit to end, which for a streaming driver
  is days of a held worker slot, so the command the hook builds is started detached instead.
* cluster mode (YARN, Kubernetes): the hook submits and tracks the application itself
  (``waitAppCompletion=false``), with the driver's secrets in a private properties file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow.configuration import conf
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook

from airflow_kafka_stream.core.cluster import placement
from airflow_kafka_stream.core.values import flag
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.hooks.airflow_api import airflow_api_env
from airflow_kafka_stream.hooks.lineage import driver_lineage_env
from airflow_kafka_stream.ops.launcher import LaunchedDriver, Submission
from airflow_kafka_stream.ops.spark_submit import (
    DRIVER_ENV_CONF,
    SubmitPlan,
    check_metrics_env,
    check_metrics_settings,
    plan_for,
    private_properties,
    start_detached,
)


def otel_env_from_airflow(settings: Mapping[str, Any]) -> dict[str, str]:
    """Airflow's ``[metrics] otel_*`` settings as the OpenTelemetry variables a driver reads (docs/metrics.md).

    Empty unless ``otel_on``: the driver then exports over OTLP/HTTP where Airflow's own metrics go.
    """
    def on(name: str) -> bool:
        return flag(settings.get(name), f"[metrics] {name}")

    if not on("otel_on"):
        return {}
    host = str(settings.get("otel_host") or "localhost").strip()
    port = str(settings.get("otel_port") or "8889").strip()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"{'https' if on('otel_ssl_active') else 'http'}://{host}:{port}",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRICS_EXPORTER": "otlp"}
    if str(settings.get("otel_interval_milliseconds") or "").strip():
        env["OTEL_METRIC_EXPORT_INTERVAL"] = str(settings["otel_interval_milliseconds"]).strip()
    if str(settings.get("otel_service") or "").strip():
        env["OTEL_SERVICE_NAME"] = str(settings["otel_service"]).strip()
    return env


def has_own_otel(*sources: Mapping[str, Any] | None) -> bool:
    """Whether the job sets OpenTelemetry variables of its own (its environment, or Spark settings that give the
    driver an environment variable, ``spark.yarn.appMasterEnv.OTEL_...``)."""
    return any(str(key).startswith("OTEL_") or ".OTEL_" in str(key) for source in sources for key in (source or {}))


def airflow_otel_settings() -> dict[str, Any]:
    """Airflow's ``[metrics] otel_*`` settings as configured (none when Airflow's configuration cannot be read)."""
    names = ("otel_on", "otel_host", "otel_port", "otel_ssl_active", "otel_interval_milliseconds", "otel_service")
    try:
        return {name: conf.get("metrics", name, fallback=None) for name in names}
    except Exception:  # noqa: BLE001 - a driver without metrics rather than no driver
        return {}


@dataclass
class AirflowSparkLauncher:
    """Launch through the ``spark`` connection (its host is the master) and ``SparkSubmitHook``.

    :param spark_conn_id: the connection; a submission that records another one keeps its own unless
        ``override`` (a task that names its connection explicitly).
    :param kafka: the librdkafka settings the driver gets in its environment (secrets included).
    :param storage_options: fsspec options of a job home that is not local (secrets included).
    """

    job_home: str
    spark_conn_id: str
    kafka: Mapping[str, Any]
    storage_options: Mapping[str, Any] | None = None

    def check(self, submission: Submission, extra_env: Mapping[str, str] | None = None) -> None:
        """Refuse, before anything starts, what the driver would refuse when it starts: its metrics settings,
        the job's own or those it would get from Airflow's ``[metrics]``."""
        try:
            connection = SparkSubmitHook(conn_id=self.spark_conn_id, deploy_mode=submission.deploy_mode)._connection
        except Exception:  # noqa: BLE001 - an undefined connection is refused by launch, with its way out
            return
        otel = self._airflow_otel(submission, extra_env)
        if otel:
            check_metrics_env(otel, "from Airflow's [metrics] otel_* settings, which the driver is given")
        where = placement(connection["master"], submission.deploy_mode or connection["deploy_mode"])
        check_metrics_settings(where, submission.spark_conf, {**os.environ, **(extra_env or {})},
                               "the Airflow worker's environment")

    @staticmethod
    def _airflow_otel(submission: Submission, extra_env: Mapping[str, str] | None) -> dict[str, str]:
        """Airflow's ``[metrics]`` OpenTelemetry settings for the driver, unless the job sets its own."""
        if has_own_otel(os.environ, extra_env, submission.spark_conf):
            return {}
        return otel_env_from_airflow(airflow_otel_settings())

    def launch(self, submission: Submission, log_path: str,
               extra_env: Mapping[str, str] | None = None) -> LaunchedDriver:
        try:
            BaseHook.get_connection(self.spark_conn_id)  # SparkSubmitHook falls back to master 'yarn' silently
        except Exception as exc:  # noqa: BLE001 - Airflow raises its own not-found error types
            raise InvalidInputError(
                f"Spark connection {self.spark_conn_id!r} is not defined ({exc}); create a connection of type spark "
                "whose host is the master (local[2], spark://host:7077, yarn, k8s://...)", setting="spark_conn_id"
            ) from None
        probe = SparkSubmitHook(conn_id=self.spark_conn_id, deploy_mode=submission.deploy_mode)
        plan = plan_for(submission, master=probe._connection["master"], job_home=self.job_home, kafka=self.kafka,
                        storage_options=self.storage_options, deploy_mode=probe._connection["deploy_mode"])
        spark = SparkSubmitHook(conn_id=self.spark_conn_id, **plan.hook_kwargs)
        # Airflow's [metrics] and [openlineage] settings the driver reads as its clients' own variables, and the
        # Airflow API connection it announces its output asset through.
        airflow_env = {**self._airflow_otel(submission, extra_env), **airflow_api_env(),
                       **driver_lineage_env({**os.environ, **(extra_env or {})})}
        if plan.where.driver_elsewhere:
            if airflow_env and plan.where.manager in DRIVER_ENV_CONF:
                plan.properties.update({DRIVER_ENV_CONF[plan.where.manager].format(k): v for k, v in airflow_env.items()})
            return self._submit_to_cluster(SparkSubmitHook, plan, submission.program, log_path)
        command = spark._build_spark_submit_command(submission.program)
        env = {**os.environ, **(spark._env or {}), **plan.driver_env, **airflow_env, **(extra_env or {})}
        return start_detached(command, plan, log_path, env)

    def master(self) -> str | None:
        """The connection's master, recorded with a submission so the command line can replay it."""
        try:
            return SparkSubmitHook(conn_id=self.spark_conn_id)._connection["master"]
        except Exception:  # noqa: BLE001 - an undefined connection is refused by launch, with its way out
            return None

    def _submit_to_cluster(self, hook_class, plan: SubmitPlan, application: str, log_path: str) -> LaunchedDriver:
        with private_properties(plan) as properties:
            try:
                spark = hook_class(conn_id=self.spark_conn_id, properties_file=properties, **plan.hook_kwargs)
                spark.submit(application)
            except Exception as exc:  # noqa: BLE001 - the hook raises AirflowException with spark-submit's output
                raise JobStateError(f"spark-submit to {plan.where.manager} in cluster mode failed: {exc}") from exc
        application_id = spark._yarn_application_id or spark._kubernetes_driver_pod
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"submitted to {plan.where.manager} in cluster mode: {application_id}\n")
        return LaunchedDriver(None, None, log_path, application_id)
