"""spark-submit commands for each cluster manager, built by SparkSubmitHook from plan_submit: no secret in them."""

from __future__ import annotations

import glob
import json
import os
import tempfile

import pytest

from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.ops.launcher import CLIENT_CONFIG_ENV, Submission
from airflow_kafka_stream.ops.spark_submit import SparkSubmitLauncher, plan_for, plan_submit, render_properties
from airflow_kafka_stream.storage.files import STORAGE_OPTIONS_ENV
from tests.airflow_helpers import set_connection

SECRET = "pw-" + "Hq7Xe"
KAFKA = {"bootstrap.servers": "b:9092", "sasl.password": SECRET}
STORAGE = {"key": "AKIA", "secret": SECRET}


def plan(master: str, mode: str | None, environment: str | None = None, home: str = "s3://bucket/jobs/a", **extra):
    return plan_submit(master=master, deploy_mode=mode, spark_conf={"spark.executor.memory": "2g"}, kafka=KAFKA,
                       storage_options=STORAGE, job_home=home, job_home_shared=False,
                       executor_environment=environment, name="stream-a", args=["--home", home],
                       driver_python="/opt/airflow/venv/bin/python", **extra)


def command(monkeypatch, master: str, mode: str | None, planned) -> list[str]:
    from airflow.providers.apache.spark.hooks import spark_submit

    if master.startswith("k8s://"):
        # Only the command is built (no cluster is called): the cncf.kubernetes provider is not installed here.
        monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)
    set_connection(monkeypatch, "spark_test", json.dumps({"conn_type": "spark", "host": master}))
    hook = spark_submit.SparkSubmitHook(conn_id="spark_test", properties_file="/private/driver.properties",
                                        **planned.hook_kwargs)
    return hook._build_spark_submit_command("/apps/job.py")


@pytest.mark.parametrize(("master", "env_conf", "wait_conf"), [
    ("yarn", "spark.yarn.appMasterEnv", "spark.yarn.submit.waitAppCompletion=false"),
    ("k8s://https://api:6443", "spark.kubernetes.driverEnv", "spark.kubernetes.submission.waitAppCompletion=false"),
])
def test_cluster_mode_command_ships_the_environment_and_keeps_secrets_in_a_file(monkeypatch, tmp_path, master,
                                                                                 env_conf, wait_conf):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"archive")
    planned = plan(master, "cluster", str(archive))
    args = command(monkeypatch, master, "cluster", planned)
    text = " ".join(args)
    assert SECRET not in text, "a secret in spark-submit's arguments is visible in the process list"
    assert ["--deploy-mode", "cluster"] == args[args.index("--deploy-mode"):args.index("--deploy-mode") + 2]
    assert f"--archives {archive}#environment" in text
    assert "spark.pyspark.python=./environment/bin/python" in text
    assert "spark.pyspark.driver.python" not in text, "in cluster mode the driver uses the shipped environment too"
    assert wait_conf in text, "the hook's submission returns once the application is accepted"
    assert "--properties-file /private/driver.properties" in text
    properties = render_properties(planned.properties)
    assert f"{env_conf}.{CLIENT_CONFIG_ENV}=" in properties and f"{env_conf}.{STORAGE_OPTIONS_ENV}=" in properties
    assert SECRET in properties, "the driver gets its secrets from the properties file"


def test_client_mode_on_a_loopback_standalone_cluster(monkeypatch, tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"archive")
    planned = plan("spark://127.0.0.1:7077", None, str(archive), home=str(tmp_path / "home"))
    text = " ".join(command(monkeypatch, "spark://127.0.0.1:7077", None, planned))
    assert SECRET not in text and not planned.properties
    assert "spark.pyspark.driver.python=/opt/airflow/venv/bin/python" in text, "the client-mode driver runs here"
    assert "spark.driver.host=127.0.0.1" in text, "executors on loopback must reach the driver on loopback"
    assert json.loads(planned.driver_env[CLIENT_CONFIG_ENV]) == KAFKA, "secrets travel in the driver's environment"


def test_an_interpreter_installed_on_every_node(monkeypatch):
    planned = plan("yarn", "client", "python:/opt/stream-env/bin/python")
    text = " ".join(command(monkeypatch, "yarn", "client", planned))
    assert "spark.pyspark.python=/opt/stream-env/bin/python" in text and "--archives" not in text


def test_python_workers_talk_over_a_unix_socket_unless_the_job_says_otherwise(monkeypatch):
    """Loopback TCP held each Python task's input ~40 ms (Nagle and a delayed ACK): a submit sets the Unix
    socket on, and a spark_conf that names the setting keeps its own value."""
    text = " ".join(command(monkeypatch, "yarn", "client", plan("yarn", "client")))
    assert "spark.python.unix.domain.socket.enabled=true" in text
    own = plan_submit(master="yarn", deploy_mode="client", spark_conf={"spark.python.unix.domain.socket.enabled": "false"},
                      kafka=KAFKA, storage_options=None, job_home="s3://bucket/jobs/a", job_home_shared=False,
                      executor_environment=None, name="stream-a", args=[])
    assert own.hook_kwargs["conf"]["spark.python.unix.domain.socket.enabled"] == "false"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"master": "spark://master:7077", "mode": None, "home": "/data/jobs/a"}, "job_home_shared=True"),
    ({"master": "spark://master:7077", "mode": "cluster"}, "standalone manager runs Python drivers in client mode"),
    ({"master": "yarn", "mode": "client", "environment": "python:bin/python"}, "absolute path"),
    ({"master": "yarn", "mode": "client", "environment": "/nowhere/env.tar.gz"}, "neither 'packed'"),
])
def test_refusals_name_the_setting(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        plan(**kwargs)


def test_properties_escape_keys_and_keep_json_values():
    text = render_properties({"spark.a b": 'x\\y', "k": '{"a": "b:c"}'})
    assert text == 'k={"a": "b:c"}\nspark.a\\ b=x\\\\y\n'


def test_a_failed_cluster_submission_leaves_no_secrets_file(monkeypatch, tmp_path):
    """spark-submit to a YARN that is not there fails; the private properties file is gone all the same."""
    from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher

    set_connection(monkeypatch, "spark_yarn", json.dumps({"conn_type": "spark", "host": "yarn",
                                                          "extra": {"deploy-mode": "cluster"}}))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "aks-submit-*")))
    with pytest.raises(JobStateError, match="spark-submit to yarn in cluster mode failed"):
        AirflowSparkLauncher("s3://bucket/jobs/a", "spark_yarn", KAFKA, STORAGE).launch(
            Submission("1", application="/apps/job.py"), str(tmp_path / "driver.log"))
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "aks-submit-*"))) == before


def test_client_mode_drivers_on_one_environment_share_one_working_directory(monkeypatch, tmp_path):
    """./environment must resolve in the driver's working directory; one folder per environment, not per launch
    (a driver cannot remove the directory it runs in, so per-launch folders piled up in /tmp)."""
    from airflow_kafka_stream.ops.spark_submit import driver_workdir as _driver_workdir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"archive")
    planned = plan("spark://127.0.0.1:7077", None, str(archive), home=str(tmp_path / "home"))
    first = _driver_workdir(planned)
    assert _driver_workdir(planned) == first
    assert os.readlink(os.path.join(first, "environment")) == "/opt/airflow/venv"
    # A damaged folder (its link points at another environment) is replaced, not used.
    os.unlink(os.path.join(first, "environment"))
    os.symlink("/elsewhere", os.path.join(first, "environment"))
    assert _driver_workdir(planned) == first
    assert os.readlink(os.path.join(first, "environment")) == "/opt/airflow/venv"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("aks-driver")) == [os.path.basename(first)]


def test_the_direct_launcher_builds_the_same_command_without_airflow_and_no_secret_in_it():
    """The command line's launcher: spark-submit with the plan's settings; secrets only in the environment."""
    planned = plan("spark://127.0.0.1:7077", None)
    launcher = SparkSubmitLauncher("s3://bucket/jobs/a", "spark://127.0.0.1:7077", KAFKA, STORAGE,
                                   spark_submit="/opt/spark/bin/spark-submit")
    args = launcher.command(planned, "spark://127.0.0.1:7077", "/apps/job.py")
    assert args[:3] == ["/opt/spark/bin/spark-submit", "--master", "spark://127.0.0.1:7077"]
    assert args[-3:] == ["/apps/job.py", "--home", "s3://bucket/jobs/a"]
    assert "spark.executor.memory=2g" in args and ["--deploy-mode", "client"] == args[args.index("--deploy-mode"):][:2]
    assert SECRET not in " ".join(args)
    assert SECRET in planned.driver_env[CLIENT_CONFIG_ENV] and SECRET in planned.driver_env[STORAGE_OPTIONS_ENV]


@pytest.mark.parametrize(("record", "why"), [
    pytest.param({"app_version": "2", "application_args": ["--a", 1], "spark_conf": {"k": 1},
                  "submitted_at": "2026-01-01T00:00:00+00:00"}, "a record a submit wrote, with its time",
                 id="1-recorded-submission-round-trips"),
    pytest.param({"app_version": "2"}, "an old record with the version alone", id="2-minimal-record"),
])
def test_a_recorded_submission_replays_as_written(record, why):
    submission = Submission.from_record(record)
    again = Submission.from_record(submission.to_record())
    assert again == submission, why
    assert submission.app_version == "2"
    assert all(isinstance(arg, str) for arg in submission.application_args)


def test_a_submission_without_a_version_is_refused_naming_it():
    with pytest.raises(InvalidInputError, match="app_version is empty") as refused:
        Submission(" ")
    assert refused.value.settings == ("app_version",)


OTEL_REFUSALS = [
    # id, spark connection extra, spark_conf, worker environment, Airflow [metrics] settings, named, parameter, why
    ("cluster-conf", {"deploy-mode": "cluster"},
     {"spark.yarn.appMasterEnv.OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
      "spark.yarn.appMasterEnv.OTEL_METRIC_EXPORT_INTERVAL": "soon"}, {}, {},
     "OTEL_METRIC_EXPORT_INTERVAL='soon'", "StreamSubmitOperator parameter: spark_conf",
     "a cluster driver's variable set through spark_conf names that parameter"),
    ("worker-env", {}, {}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "otlp,zipkin"},
     {}, "OTEL_METRICS_EXPORTER names zipkin", "the Airflow worker's environment",
     "a client-mode driver inherits the worker's environment"),
    ("airflow-metrics", {}, {}, {}, {"OTEL_ON": "True", "OTEL_INTERVAL_MILLISECONDS": "often"},
     "OTEL_METRIC_EXPORT_INTERVAL='often'", "Airflow's [metrics] otel_* settings",
     "what the driver would get from Airflow's own [metrics] is checked too"),
]


@pytest.mark.parametrize(("case", "extra", "spark_conf", "env", "metrics", "named", "where", "why"), OTEL_REFUSALS,
                         ids=[c[0] for c in OTEL_REFUSALS])
def test_the_submit_operator_refuses_bad_metrics_settings_before_launching(monkeypatch, tmp_path, case, extra,
                                                                          spark_conf, env, metrics, named, where, why):
    """A task that would start a driver refusing its OpenTelemetry settings fails at once, naming the variable
    and where it is set; nothing is launched and no job home is made."""
    from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher
    from airflow_kafka_stream.operators.submit import StreamSubmitOperator

    set_connection(monkeypatch, "spark_otel", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra}))
    set_connection(monkeypatch, "kafka_otel", json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "b:9"}}))
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    for name, value in {**env, **{f"AIRFLOW__METRICS__{k}": v for k, v in metrics.items()}}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(AirflowSparkLauncher, "launch", lambda *a, **k: pytest.fail("a driver was launched"))
    home = tmp_path / "home"
    task = StreamSubmitOperator(task_id="submit", job_home=str(home), app_version="2", topics=["orders"],
                                group="g", output_path=str(tmp_path / "out"), spark_conn_id="spark_otel",
                                kafka_conn_id="kafka_otel", spark_conf=spark_conf, job_home_shared=True)
    with pytest.raises(InvalidInputError) as refused:
        task.execute({})
    assert named in str(refused.value) and where in str(refused.value), (why, str(refused.value))
    assert "nothing was launched" in str(refused.value)
    assert not home.exists(), "no job home was made"


@pytest.fixture
def installed_connector(monkeypatch, tmp_path):
    """Spark's Kafka connector installed beside the environment (two jars) and a Spark installation without it."""
    connector, spark = tmp_path / "spark-kafka", tmp_path / "spark"
    for folder, names in ((connector, ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar")),
                          (spark / "jars", ("spark-core_2.13-4.2.0.jar",))):
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_bytes(b"PK")
    monkeypatch.setenv("AKS_SPARK_KAFKA_JARS", str(connector))
    monkeypatch.setenv("SPARK_HOME", str(spark))
    return sorted(str(jar) for jar in connector.iterdir())


@pytest.mark.parametrize(("master", "mode"), [("local[2]", None), ("spark://127.0.0.1:7077", None),
                                               ("yarn", "cluster")])
def test_every_launch_gets_the_installed_connector_after_the_users_own_jars(monkeypatch, installed_connector,
                                                                            master, mode):
    planned = plan_submit(master=master, deploy_mode=mode, spark_conf={"spark.jars": "/apps/udfs.jar"}, kafka=KAFKA,
                          storage_options=None, job_home="s3://bucket/jobs/a", job_home_shared=False,
                          executor_environment=None, name="stream-a", args=[])
    expected = ",".join(["/apps/udfs.jar", *installed_connector])
    assert planned.hook_kwargs["conf"]["spark.jars"] == expected
    assert f"spark.jars={expected}" in command(monkeypatch, master, mode, planned), "through SparkSubmitHook"
    direct = SparkSubmitLauncher("s3://bucket/jobs/a", master, KAFKA).command(planned, master, "/apps/job.py")
    assert f"spark.jars={expected}" in direct, "through spark-submit directly"


def test_a_recorded_choice_is_what_each_replay_launches_with(installed_connector):
    def jars(submission: Submission) -> str | None:
        return plan_for(submission, master="local[2]", job_home="/jobs/a", kafka=KAFKA,
                        storage_options=None).hook_kwargs["conf"].get("spark.jars")

    assert jars(Submission("1")) == ",".join(installed_connector), "auto (an older record names no choice)"
    assert jars(Submission("1", kafka_connector="provided")) is None
    theirs = {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}
    assert jars(Submission("1", spark_conf=theirs)) is None, "auto: Spark's settings already bring it"


def test_bundled_without_installed_jars_is_refused_before_any_launch(monkeypatch, tmp_path):
    monkeypatch.setenv("AKS_SPARK_KAFKA_JARS", str(tmp_path / "nothing-here"))
    with pytest.raises(InvalidInputError, match="are not installed here") as refused:
        plan_for(Submission("1", kafka_connector="bundled"), master="local[2]", job_home="/jobs/a", kafka=KAFKA,
                 storage_options=None)
    assert refused.value.setting == "kafka_connector"


def test_the_submit_operator_takes_the_deployments_connector_choice_and_refuses_an_unknown_one(monkeypatch, tmp_path):
    """``[airflow_kafka_stream] kafka_connector`` is the default of every submit; a bad word is refused at once,
    naming the parameter, and nothing is launched."""
    from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher
    from airflow_kafka_stream.operators.submit import StreamSubmitOperator

    set_connection(monkeypatch, "spark_default", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    set_connection(monkeypatch, "kafka_default", json.dumps({"conn_type": "kafka",
                                                             "extra": {"bootstrap.servers": "b:9"}}))
    monkeypatch.setattr(AirflowSparkLauncher, "launch", lambda *a, **k: pytest.fail("a driver was launched"))
    job = {"task_id": "submit", "job_home": str(tmp_path / "home"), "app_version": "1", "topics": ["orders"],
           "group": "g", "output_path": str(tmp_path / "out")}
    monkeypatch.setenv("AIRFLOW__AIRFLOW_KAFKA_STREAM__KAFKA_CONNECTOR", "provided")
    assert StreamSubmitOperator(**job)._launch_plan()[1].kafka_connector == "provided"
    assert StreamSubmitOperator(**job, kafka_connector="bundled")._launch_plan()[1].kafka_connector == "bundled"
    with pytest.raises(InvalidInputError, match="kafka_connector 'maven' is not one of") as refused:
        StreamSubmitOperator(**job, kafka_connector="maven")
    assert refused.value.setting == "kafka_connector"
