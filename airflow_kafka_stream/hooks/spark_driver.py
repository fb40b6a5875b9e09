"""Start a job's Spark driver with the Spark provider's SparkSubmitHook building the command.

Two ways, chosen by where the driver runs:

* client mode (local, standalone, or YARN/Kubernetes client): ``SparkSubmitHook.submit``
  would wait for spark-submit to end, which for a streaming driver is days of a held
  worker slot. The command the hook builds is started here instead, in its own session
  (the end of the task does not end it), output in a log file, tracked through the job
  home. The Kafka settings and storage options, secrets included, travel in the
  environment, never in the arguments.
* cluster mode (YARN, Kubernetes): the hook submits and tracks the application itself
  (``waitAppCompletion=false``, so spark-submit returns once the application is
  accepted; the hook reads the YARN application id or the driver pod from its output).
  The driver's environment reaches it through a properties file (mode 0600, removed
  once spark-submit has read it): ``--conf`` values would be visible in the process list.

The executors' Python environment is declared with ``executor_environment``: ``packed``
(this environment packed with :mod:`airflow_kafka_stream.cluster.environment`), the
path or URL of such an archive, or ``python:/path/bin/python`` for an environment
installed at that path on every node.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_stream.core.cluster import Placement, check_job_home_reach, placement
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.ops.submit import CLIENT_CONFIG_ENV, LaunchedDriver
from airflow_kafka_stream.storage.files import STORAGE_OPTIONS_ENV

EXAMPLE_PIPELINE = str(Path(__file__).resolve().parents[1] / "jobs" / "example_pipeline.py")
ARCHIVE_ALIAS = "environment"
PACKED = "packed"
INSTALLED_PREFIX = "python:"
WAIT_CONF = {"yarn": "spark.yarn.submit.waitAppCompletion", "kubernetes": "spark.kubernetes.submission.waitAppCompletion"}
DRIVER_ENV_CONF = {"yarn": "spark.yarn.appMasterEnv.{}", "kubernetes": "spark.kubernetes.driverEnv.{}"}


@dataclass
class SubmitPlan:
    """What one submit runs: the hook's arguments, the driver's secret environment, where the driver runs."""

    where: Placement
    hook_kwargs: dict[str, Any]
    driver_env: dict[str, str]
    environment_archive: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


def plan_submit(*, master: str, deploy_mode: str | None, spark_conf: Mapping[str, Any], kafka: Mapping[str, Any],
                storage_options: Mapping[str, Any] | None, job_home: str | None, job_home_shared: bool,
                executor_environment: str | None, name: str, args: Sequence[str],
                driver_python: str | None = None) -> SubmitPlan:
    """Decide the submit (no I/O but packing an environment); refuses a job home the cluster cannot share."""
    where = placement(master, deploy_mode)
    if job_home is not None:
        check_job_home_reach(job_home, where, job_home_shared)
    conf = {key: str(value) for key, value in spark_conf.items()}
    kwargs: dict[str, Any] = {"name": name, "application_args": list(args), "deploy_mode": where.deploy_mode}
    archive = _environment(executor_environment, where, conf, driver_python or sys.executable)
    if archive:
        kwargs["archives"] = f"{archive}#{ARCHIVE_ALIAS}"
    if where.manager == "standalone" and not where.executors_elsewhere:
        conf.setdefault("spark.driver.host", "127.0.0.1")  # executors on loopback reach a loopback driver
    driver_env = {CLIENT_CONFIG_ENV: json.dumps(dict(kafka))}
    if storage_options:
        driver_env[STORAGE_OPTIONS_ENV] = json.dumps(dict(storage_options))
    properties: dict[str, str] = {}
    if where.driver_elsewhere:
        if where.manager not in DRIVER_ENV_CONF:
            raise InvalidInputError(f"deploy mode cluster on {where.manager}: Spark's standalone manager runs Python "
                                    "drivers in client mode only; drop deploy_mode=cluster")
        conf.setdefault(WAIT_CONF[where.manager], "false")
        properties = {DRIVER_ENV_CONF[where.manager].format(key): value for key, value in driver_env.items()}
    kwargs["conf"] = conf
    return SubmitPlan(where, kwargs, driver_env, archive, properties)


def _environment(choice: str | None, where: Placement, conf: dict[str, str], driver_python: str) -> str | None:
    """Set the executors' (and a client-mode driver's) Python; the archive to ship, if any."""
    if not choice:
        return None
    if choice.startswith(INSTALLED_PREFIX):
        python = choice[len(INSTALLED_PREFIX):]
        if not os.path.isabs(python):
            raise InvalidInputError(f"executor_environment {choice!r}: give the absolute path of the interpreter "
                                    "installed on every node, e.g. python:/opt/stream-env/bin/python")
        conf.setdefault("spark.pyspark.python", python)
        return None
    if choice == PACKED:
        from airflow_kafka_stream.cluster.environment import pack_executor_environment

        archive = str(pack_executor_environment())
    else:
        archive = choice
        if "://" not in archive and not os.path.isfile(archive):
            raise InvalidInputError(f"executor_environment {choice!r} is neither 'packed', python:/path, nor an "
                                    "existing archive; pack one with `airflow-kafka-stream pack-env`")
    conf.setdefault("spark.pyspark.python", f"./{ARCHIVE_ALIAS}/bin/python")
    if not where.driver_elsewhere:
        conf.setdefault("spark.pyspark.driver.python", driver_python)
    return archive


def launch_driver(*, spark_conn_id: str, application: str | None, args: Sequence[str],
                  spark_conf: Mapping[str, Any], kafka: Mapping[str, Any], log_path: str, name: str,
                  storage_options: Mapping[str, Any] | None = None, job_home: str | None = None,
                  job_home_shared: bool = False, executor_environment: str | None = None,
                  deploy_mode: str | None = None, extra_env: Mapping[str, str] | None = None) -> LaunchedDriver:
    """Start the driver: detached here (client mode) or through the hook (cluster mode); ``extra_env`` is added
    to a detached driver's environment (e.g. a standby's token)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import BaseHook

    try:
        BaseHook.get_connection(spark_conn_id)  # SparkSubmitHook falls back to master 'yarn' without a word
    except Exception as exc:  # noqa: BLE001 - Airflow raises its own not-found error types
        raise InvalidInputError(f"Spark connection {spark_conn_id!r} is not defined ({exc}); create a connection of "
                                "type spark whose host is the master (local[2], spark://host:7077, yarn, k8s://...)"
                                ) from None
    probe = SparkSubmitHook(conn_id=spark_conn_id, deploy_mode=deploy_mode)
    plan = plan_submit(master=probe._connection["master"], deploy_mode=probe._connection["deploy_mode"],
                       spark_conf=spark_conf, kafka=kafka, storage_options=storage_options, job_home=job_home,
                       job_home_shared=job_home_shared, executor_environment=executor_environment, name=name,
                       args=args)
    if plan.where.driver_elsewhere:
        return _submit_to_cluster(SparkSubmitHook, spark_conn_id, plan, application or EXAMPLE_PIPELINE, log_path)
    spark = SparkSubmitHook(conn_id=spark_conn_id, **plan.hook_kwargs)
    command = spark._build_spark_submit_command(application or EXAMPLE_PIPELINE)
    env = {**os.environ, **(spark._env or {}), **plan.driver_env, **(extra_env or {})}
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=_driver_workdir(plan), start_new_session=True, close_fds=True)
    return LaunchedDriver(process.pid, socket.gethostname(), log_path)


def _driver_workdir(plan: SubmitPlan) -> str | None:
    """A client-mode driver's working directory, where ``./environment`` is the driver's own environment.

    Spark starts the Python workers that plan a Python data source on the driver with the executors'
    interpreter setting (``./environment/bin/python``), relative to the driver's working directory. One
    folder per environment, made once and shared by every driver that runs on it: a folder per launch would
    be left behind by every driver, since none can remove the directory it runs in.
    """
    if not plan.environment_archive:
        return None
    python = plan.hook_kwargs["conf"].get("spark.pyspark.driver.python", sys.executable)
    environment = str(Path(python).parent.parent)
    digest = hashlib.sha256(environment.encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"aks-driver-{os.getuid()}-{digest}")
    link = os.path.join(folder, ARCHIVE_ALIAS)
    for _attempt in range(3):
        if os.path.islink(link) and os.readlink(link) == environment:
            return folder
        staging = tempfile.mkdtemp(prefix="aks-driver-new-")  # complete before it takes the shared name
        os.symlink(environment, os.path.join(staging, ARCHIVE_ALIAS))
        try:
            os.rename(staging, folder)
        except OSError:  # another launch made it first, or a damaged one is in the way: look again
            shutil.rmtree(staging, ignore_errors=True)
            if not os.path.islink(link) or os.readlink(link) != environment:
                shutil.rmtree(folder, ignore_errors=True)
    if os.path.islink(link) and os.readlink(link) == environment:
        return folder
    raise JobStateError(f"cannot make the driver's working directory {folder} (a link {ARCHIVE_ALIAS} -> "
                        f"{environment}); remove {folder} and submit again")


def _submit_to_cluster(hook_class, spark_conn_id: str, plan: SubmitPlan, application: str,
                       log_path: str) -> LaunchedDriver:
    """Cluster mode: the hook submits and tracks; the driver's secrets go through a private properties file."""
    folder = tempfile.mkdtemp(prefix="aks-submit-")  # mode 0700
    properties = os.path.join(folder, "driver.properties")
    descriptor = os.open(properties, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(render_properties(plan.properties))
    try:
        spark = hook_class(conn_id=spark_conn_id, properties_file=properties, **plan.hook_kwargs)
        spark.submit(application)
    except Exception as exc:  # noqa: BLE001 - the hook raises AirflowException with spark-submit's output
        raise JobStateError(f"spark-submit to {plan.where.manager} in cluster mode failed: {exc}") from exc
    finally:
        os.unlink(properties)
        os.rmdir(folder)
    application_id = spark._yarn_application_id or spark._kubernetes_driver_pod
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"submitted to {plan.where.manager} in cluster mode: {application_id}\n")
    return LaunchedDriver(None, None, log_path, application_id)


def render_properties(values: Mapping[str, str]) -> str:
    """Java properties text (what spark-submit --properties-file reads): keys and values escaped."""

    def escape(text: str, key: bool = False) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return text.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ") if key else text

    return "".join(f"{escape(k, key=True)}={escape(v)}\n" for k, v in sorted(values.items()))
