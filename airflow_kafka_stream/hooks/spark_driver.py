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

from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.ops.launcher import LaunchedDriver, Submission
from airflow_kafka_stream.ops.spark_submit import SubmitPlan, plan_for, private_properties, start_detached


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

    def launch(self, submission: Submission, log_path: str,
               extra_env: Mapping[str, str] | None = None) -> LaunchedDriver:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
        from airflow.sdk import BaseHook

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
        if plan.where.driver_elsewhere:
            return self._submit_to_cluster(SparkSubmitHook, plan, submission.program, log_path)
        spark = SparkSubmitHook(conn_id=self.spark_conn_id, **plan.hook_kwargs)
        command = spark._build_spark_submit_command(submission.program)
        env = {**os.environ, **(spark._env or {}), **plan.driver_env, **(extra_env or {})}
        return start_detached(command, plan, log_path, env)

    def master(self) -> str | None:
        """The connection's master, recorded with a submission so the command line can replay it."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

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
