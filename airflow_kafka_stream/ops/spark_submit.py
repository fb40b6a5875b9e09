"""spark-submit for a job's driver: the plan (where it runs, what it ships, its secret environment) and the
direct launcher the command line uses.

Two ways, chosen by where the driver runs:

* client mode (local, standalone, or YARN/Kubernetes client): spark-submit is started in its own session
  (the caller's end does not end it), output in a log file, tracked through the job home. The Kafka
  settings and storage options, secrets included, travel in the environment, never in the arguments.
* cluster mode (YARN, Kubernetes): spark-submit returns once the application is accepted
  (``waitAppCompletion=false``); the driver's environment reaches it through a properties file (mode
  0600, removed once spark-submit has read it): ``--conf`` values would be visible in the process list.

Spark's own Kafka connector (``core.kafka_connector``) joins ``spark.jars`` from the jars installed here, so that
the driver's class loader has it from its start and the executors get it from the driver.

The executors' Python environment is declared with ``executor_environment``: ``packed`` (this environment
packed with :mod:`airflow_kafka_stream.cluster.environment`), the path or URL of such an archive, or
``python:/path/bin/python`` for an environment installed at that path on every node. Airflow's launcher
(``hooks.spark_driver``) builds its command from the same plan through ``SparkSubmitHook``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_stream.cluster.environment import pack_executor_environment
from airflow_kafka_stream.cluster.jvm_jars import spark_installation_jars, spark_kafka_jars
from airflow_kafka_stream.core.cluster import Placement, check_job_home_reach, placement
from airflow_kafka_stream.core.kafka_connector import connector_jars, with_jars
from airflow_kafka_stream.core.metrics_settings import read_settings
from airflow_kafka_stream.core.spark_settings import with_default_settings
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.ops.launcher import CLIENT_CONFIG_ENV, LaunchedDriver, Submission, driver_name
from airflow_kafka_stream.storage.files import STORAGE_OPTIONS_ENV

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
                driver_python: str | None = None, kafka_connector: str | None = None) -> SubmitPlan:
    """Decide the submit (no I/O but packing an environment and finding the jars of Spark's Kafka connector);
    refuses a job home the cluster cannot share."""
    where = placement(master, deploy_mode)
    if job_home is not None:
        check_job_home_reach(job_home, where, job_home_shared)
    conf = with_default_settings({key: str(value) for key, value in spark_conf.items()})
    conf = with_jars(conf, connector_jars(
        kafka_connector, conf, spark_kafka_jars(), spark_installation_jars(),
        driver_in_container=where.driver_elsewhere and where.manager == "kubernetes"))
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
                                    "drivers in client mode only; use client mode", setting="deploy_mode")
        conf.setdefault(WAIT_CONF[where.manager], "false")
        properties = {DRIVER_ENV_CONF[where.manager].format(key): value for key, value in driver_env.items()}
    kwargs["conf"] = conf
    return SubmitPlan(where, kwargs, driver_env, archive, properties)


def check_metrics_settings(where: Placement, spark_conf: Mapping[str, Any], inherited: Mapping[str, str],
                           inherited_from: str) -> None:
    """Refuse, before a driver is launched, the OpenTelemetry settings it would refuse when it starts
    (``core.metrics_settings.read_settings``; docs/metrics.md), naming the variable and where it is set.

    A driver on this machine inherits ``inherited`` (``inherited_from`` says whose environment that is); a
    driver that the cluster starts (cluster mode on YARN or Kubernetes) gets only the Spark settings that
    give it an environment variable (``spark.yarn.appMasterEnv.OTEL_...``).
    """
    if where.driver_elsewhere and where.manager in DRIVER_ENV_CONF:
        prefix = DRIVER_ENV_CONF[where.manager].format("")
        env = {key[len(prefix):]: str(value) for key, value in spark_conf.items() if key.startswith(prefix)}
        check_metrics_env(env, f"set by the Spark setting {prefix}<variable>", "spark_conf")
    else:
        check_metrics_env(inherited, f"in {inherited_from}, which the driver inherits")


def check_metrics_env(env: Mapping[str, str], source: str, setting: str | None = None) -> None:
    """Refuse the OpenTelemetry settings of a driver's environment ``env`` that it would refuse at its start."""
    try:
        read_settings(env)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{exc} ({source}); the driver would refuse it when it starts, so nothing was "
                                "launched", setting=setting) from None


def _environment(choice: str | None, where: Placement, conf: dict[str, str], driver_python: str) -> str | None:
    """Set the executors' (and a client-mode driver's) Python; the archive to ship, if any."""
    if not choice:
        return None
    if choice.startswith(INSTALLED_PREFIX):
        python = choice[len(INSTALLED_PREFIX):]
        if not os.path.isabs(python):
            raise InvalidInputError(f"executor_environment {choice!r}: give the absolute path of the interpreter "
                                    "installed on every node, e.g. python:/opt/stream-env/bin/python",
                                    setting="executor_environment")
        conf.setdefault("spark.pyspark.python", python)
        return None
    if choice == PACKED:
        archive = str(pack_executor_environment())
    else:
        archive = choice
        if "://" not in archive and not os.path.isfile(archive):
            raise InvalidInputError(f"executor_environment {choice!r} is neither 'packed', python:/path, nor an "
                                    "existing archive; pack one with `airflow-kafka-stream pack-env`",
                                setting="executor_environment")
    conf.setdefault("spark.pyspark.python", f"./{ARCHIVE_ALIAS}/bin/python")
    if not where.driver_elsewhere:
        conf.setdefault("spark.pyspark.driver.python", driver_python)
    return archive


def driver_workdir(plan: SubmitPlan) -> str | None:
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
                        f"{environment}); remove {folder} and submit again", setting="executor_environment")


def render_properties(values: Mapping[str, str]) -> str:
    """Java properties text (what spark-submit --properties-file reads): keys and values escaped."""

    def escape(text: str, key: bool = False) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return text.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ") if key else text

    return "".join(f"{escape(k, key=True)}={escape(v)}\n" for k, v in sorted(values.items()))


def plan_for(submission: Submission, *, master: str, job_home: str, kafka: Mapping[str, Any],
             storage_options: Mapping[str, Any] | None, deploy_mode: str | None = None) -> SubmitPlan:
    """:func:`plan_submit` for a recorded submission (``deploy_mode``: the launcher's own, when it has one)."""
    return plan_submit(master=master, deploy_mode=submission.deploy_mode or deploy_mode,
                       spark_conf=submission.spark_conf, kafka=kafka, storage_options=storage_options,
                       job_home=job_home, job_home_shared=submission.job_home_shared,
                       executor_environment=submission.executor_environment, name=driver_name(job_home),
                       args=submission.application_args, kafka_connector=submission.kafka_connector)


def start_detached(command: Sequence[str], plan: SubmitPlan, log_path: str,
                   env: Mapping[str, str]) -> LaunchedDriver:
    """Start a client-mode driver in its own session, its output in ``log_path``; returns at once."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=dict(env), cwd=driver_workdir(plan), start_new_session=True, close_fds=True)
    return LaunchedDriver(process.pid, socket.gethostname(), log_path)


@contextmanager
def private_properties(plan: SubmitPlan) -> Iterator[str]:
    """A properties file only this user can read, holding the driver's secret environment; removed after."""
    folder = tempfile.mkdtemp(prefix="aks-submit-")  # mode 0700
    path = os.path.join(folder, "driver.properties")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(render_properties(plan.properties))
    try:
        yield path
    finally:
        os.unlink(path)
        os.rmdir(folder)


#: How spark-submit names the application it submitted in cluster mode (YARN, Kubernetes).
APPLICATION_ID = re.compile(r"(application_\d+_\d+)|pod name: (\S+)")


@dataclass
class SparkSubmitLauncher:
    """Launch with ``spark-submit`` directly, without Airflow: the command line's launcher.

    :param master: the Spark master (``local[2]``, ``spark://host:7077``, ``yarn``, ``k8s://...``); a
        submission that records its own master keeps it unless this one is given.
    :param kafka: the librdkafka settings the driver gets in its environment (secrets included).
    :param storage_options: fsspec options of a job home that is not local (secrets included).
    :param spark_submit: the spark-submit program (default: the one on PATH, else pyspark's).
    """

    job_home: str
    master: str | None
    kafka: Mapping[str, Any]
    storage_options: Mapping[str, Any] | None = None
    spark_submit: str | None = None

    def check(self, submission: Submission, extra_env: Mapping[str, str] | None = None) -> None:
        """Refuse, before anything starts, what the driver would refuse when it starts: its metrics settings."""
        check_metrics_settings(placement(self._master(submission), submission.deploy_mode), submission.spark_conf,
                               {**os.environ, **(extra_env or {})}, "the environment of this submit")

    def _master(self, submission: Submission) -> str:
        master = self.master or submission.master
        if not master:
            raise InvalidInputError(f"version {submission.app_version} records no Spark master; give one",
                                    setting="master")
        return master

    def launch(self, submission: Submission, log_path: str,
               extra_env: Mapping[str, str] | None = None) -> LaunchedDriver:
        master = self._master(submission)
        plan = plan_for(submission, master=master, job_home=self.job_home, kafka=self.kafka,
                        storage_options=self.storage_options)
        command = self.command(plan, master, submission.program)
        env = {**os.environ, **plan.driver_env, **(extra_env or {})}
        if not plan.where.driver_elsewhere:
            return start_detached(command, plan, log_path, env)
        with private_properties(plan) as properties:
            command[1:1] = ["--properties-file", properties]
            with open(log_path, "ab") as log:
                done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, **(extra_env or {})}, check=False)
        with open(log_path, encoding="utf-8", errors="replace") as log:
            found = APPLICATION_ID.findall(log.read())
        if done.returncode != 0:
            raise JobStateError(f"spark-submit to {plan.where.manager} in cluster mode exited with "
                                f"{done.returncode}; see {log_path}", setting="master")
        application_id = next((a or b for a, b in reversed(found)), None)
        return LaunchedDriver(None, None, log_path, application_id)

    def command(self, plan: SubmitPlan, master: str, program: str) -> list[str]:
        """The spark-submit command: settings as ``--conf``, never a secret (those are in the environment)."""
        kwargs = plan.hook_kwargs
        command = [self.spark_submit or spark_submit_program(), "--master", master]
        for key, value in sorted(kwargs["conf"].items()):
            command += ["--conf", f"{key}={value}"]
        if kwargs.get("archives"):
            command += ["--archives", kwargs["archives"]]
        command += ["--name", kwargs["name"], "--deploy-mode", kwargs["deploy_mode"], program,
                    *kwargs["application_args"]]
        return command


def spark_submit_program() -> str:
    """spark-submit on PATH, else the one that comes with pyspark."""
    found = shutil.which("spark-submit")
    if found:
        return found
    beside = Path(sys.executable).with_name("spark-submit")
    if beside.exists():
        return str(beside)
    raise InvalidInputError("spark-submit is not on PATH; install pyspark or Spark, or give its path",
                            setting="spark_submit")
