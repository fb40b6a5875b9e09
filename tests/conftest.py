"""Shared fixtures: a real Kafka-protocol broker and a real local Spark session.

Set KAFKA_BOOTSTRAP_SERVERS to run the integration tests against an existing
cluster instead of the embedded broker; topics get unique names either way.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from airflow_kafka_stream.devstack import LOOPBACK_ENV

ROOT = Path(__file__).resolve().parents[1]

# py4j logs at INFO from __del__ at interpreter exit, after pytest closed its log streams.
logging.getLogger("py4j").setLevel(logging.WARNING)

# Spark's Python workers must run this environment's interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

# Drivers the tests start (in-process, spark-submit, the Airflow stack's tasks) listen on loopback only: their Spark
# UI would otherwise bind every interface.
for _name, _value in LOOPBACK_ENV.items():
    os.environ.setdefault(_name, _value)

# Every JVM the tests start (the in-process session, spark-submit drivers, a cluster's master, workers and
# executors) lives for seconds to minutes on small data, on two cores shared by two test workers: C2
# compilation and parallel GC threads cost more CPU than they return. C1 only and the serial collector cut the
# suite's CPU by about a quarter; the benchmarks and the demo keep the JVM's defaults.
# With the class archive scripts/setup-spark-cds made, Spark's classes load from it (a JVM whose class path differs
# ignores it, silently): a third less CPU for each JVM's start.
_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
_CLASS_ARCHIVE = ROOT / ".venv" / "jvm" / "spark-classes.jsa"
if _CLASS_ARCHIVE.is_file():
    _JVM_OPTIONS += f" -XX:SharedArchiveFile={_CLASS_ARCHIVE} -Xlog:cds=off -Xlog:cds+dynamic=off"
os.environ.setdefault("JAVA_TOOL_OPTIONS", _JVM_OPTIONS)
# Spark's Python processes import PySpark from site-packages (compiled) rather than from pyspark.zip (compiled again
# by each): about 0.8 s of CPU less for each, 5-6 s a driver. Needs scripts/setup-spark-python-path (a no-op without).
os.environ.setdefault("AKS_SPARK_PYTHON_FROM_SITE_PACKAGES", "1")

# Airflow reads its home at import time: give the test run its own (SQLite, no example DAGs), before any
# test module imports airflow. See tests/airflow_helpers.py for the database and the DAGs folder.
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="aks-airflow-"))
os.environ["AIRFLOW_HOME"] = str(AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(AIRFLOW_HOME / "dags")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
# ... but our own operators, sensors and hooks log at INFO, so tests see (and check for secrets) what users see.
os.environ["AIRFLOW__LOGGING__NAMESPACE_LEVELS"] = ("airflow.task.operators.airflow_kafka_stream=INFO "
                                                     "airflow.task.hooks.airflow_kafka_stream=INFO")
(AIRFLOW_HOME / "dags").mkdir()
atexit.register(shutil.rmtree, AIRFLOW_HOME, ignore_errors=True)


#: Test modules that take minutes on two cores, longest first. The suite runs on two pytest-xdist workers, a
#: module at a time each (``--dist loadfile``); starting these first keeps one of them from running alone at the
#: end while the other worker idles.
SLOW_MODULES_FIRST = ("test_bench_smoke_lifecycle", "test_cluster_job", "test_airflow_upgrade", "test_front_ends_agree", "test_airflow_stack", "test_standby", "test_hot_standby",
                      "test_airflow_watchdog", "test_exactly_once", "test_example_pipeline_ops",
                      "test_airflow_job_ops", "test_big_partitions", "test_bench_smoke", "test_broker_failover",
                      "test_health_gate", "test_spark_kafka_lifecycle", "test_reset_oracle")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(SLOW_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: the rest keep their order


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, one broker for every worker: the controlling process starts it before the workers start
    and hands it to them as KAFKA_BOOTSTRAP_SERVERS (they inherit the environment). A second broker would cost
    its start and about 5% of a core for the whole run; every test makes its own topics and groups, so nothing
    is shared by accident. A run of unit tests alone starts none."""
    if hasattr(config, "workerinput") or os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return
    if not getattr(config.option, "numprocesses", None) or not _may_run_integration_tests(config):
        return
    from airflow_kafka_stream.devstack.broker import start_local_broker

    broker = start_local_broker()
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap_servers
    config.add_cleanup(broker.stop)


def _may_run_integration_tests(config: pytest.Config) -> bool:
    """Whether the run's paths may hold integration tests (none given: the whole suite)."""
    unit = ROOT / "tests" / "unit"
    paths = [Path(arg.split("::", 1)[0]).resolve() for arg in config.args if not arg.startswith("-")]
    return not paths or any(not path.is_relative_to(unit) for path in paths)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap servers of a real broker: KAFKA_BOOTSTRAP_SERVERS, or a local Apache Kafka started for the run."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        yield given
        return
    from airflow_kafka_stream.devstack.broker import start_local_broker

    broker = start_local_broker()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def transactional_cluster(kafka_bootstrap):
    """The test broker, for tests whose topics hold transactions (markers take offsets; aborted records are filtered
    under ``read_committed``)."""
    from tests.kafka_transactions import TransactionalCluster

    yield TransactionalCluster(kafka_bootstrap)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session for the whole run (starting one costs seconds)."""
    from airflow_kafka_stream.runtime.session import local_session

    session = local_session("tests", warehouse=str(tmp_path_factory.mktemp("spark-warehouse")))
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def s3_server():
    """A local S3 server (moto) and the fsspec storage options to reach it."""
    from moto.server import ThreadedMotoServer

    from airflow_kafka_stream.devstack.broker import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint,
                                                                          "region_name": "us-east-1"}}
    import boto3
    import s3fs

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket="stream-tests")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield {"bucket": "stream-tests", "storage_options": options, "endpoint": endpoint}
    finally:
        server.stop()


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's metadata database (SQLite in this run's AIRFLOW_HOME), migrated once."""
    import subprocess

    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    yield AIRFLOW_HOME


@pytest.fixture(scope="module")
def stack_job(kafka_bootstrap, tmp_path_factory) -> dict:
    """The job the Airflow stack's example DAGs default to: a fresh topic of two partitions, a home, a group."""
    from tests.kafka_utils import create_topic, unique

    work = tmp_path_factory.mktemp("stack-job")
    topic = create_topic(kafka_bootstrap, unique("stack"), 2)
    return {"job_home": str(work / "home"), "topics": [topic], "group": unique("stack-group"),
            "output_path": str(work / "out")}


@pytest.fixture(scope="module")
def asset_job(kafka_bootstrap, tmp_path_factory) -> dict:
    """A job of the stack whose output is an Airflow asset (``STREAM_OUTPUT_ASSET``): the downstream example DAG
    ``stream_output_hourly`` is scheduled on it."""
    from tests.kafka_utils import create_topic, unique

    work = tmp_path_factory.mktemp("asset-job")
    output = work / "out"
    return {"job_home": str(work / "home"), "topics": [create_topic(kafka_bootstrap, unique("assets"), 2)],
            "group": unique("assets-group"), "output_path": str(output), "output_asset": f"file://{output}"}


@pytest.fixture(scope="module")
def stack_lineage():
    """An OpenLineage receiver the Airflow stack's ``[openlineage]`` points at (its tasks and the drivers they launch)."""
    from tests.lineage_receiver import LineageReceiver

    receiver = LineageReceiver()
    try:
        yield receiver
    finally:
        receiver.close()


@pytest.fixture(scope="module")
def airflow_stack(kafka_bootstrap, stack_job, asset_job, stack_lineage, tmp_path_factory):
    """The full Airflow stack (two api-servers, scheduler, dag-processor, triggerer) on SQLite with the example DAGs,
    their defaults pointing at ``stack_job`` (as the demo's stack points them at the demo's job).

    Its Kafka connection carries a SASL password (unused by the PLAINTEXT broker) that must never show anywhere.
    """
    import json as _json

    from airflow_kafka_stream.devstack.airflow_stack import job_defaults_env, start_airflow_stack

    home = tmp_path_factory.mktemp("airflow-stack")
    extra = {**job_defaults_env(**stack_job),
             "AIRFLOW_CONN_KAFKA_DEFAULT": _json.dumps({"conn_type": "kafka", "extra": {
                 "bootstrap.servers": kafka_bootstrap, "sasl.username": "svc-stream", "sasl.password": STACK_SECRET}}),
             "AIRFLOW_CONN_SPARK_DEFAULT": _json.dumps({"conn_type": "spark", "host": "local[2]"}),
             # Every wait defers after one look, so the test sees each of them in the triggerer (by default a
             # stop or a handover that ends within seconds ends in its slot, shown by tests/unit/airflow/test_waiting.py).
             "AIRFLOW__AIRFLOW_KAFKA_STREAM__DEFER_AFTER_SECONDS": "0",
             # One restart allowed by stream_supervisor: the supervisor test's second crash is the loop given up on.
             "STREAM_SUPERVISOR_MAX_RESTARTS": "1",
             "STREAM_OUTPUT_ASSET": asset_job["output_asset"],
             # Lineage of every task and driver to a local receiver (docs/lineage.md); drivers report RUNNING every 5 s.
             "AIRFLOW__OPENLINEAGE__TRANSPORT": _json.dumps({"type": "http", "url": stack_lineage.url, "timeout": 5}),
             "AIRFLOW__OPENLINEAGE__NAMESPACE": "aks-stack", "AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL": "5"}
    stack = start_airflow_stack(home, ROOT / "dags", extra_env=extra)
    try:
        yield stack
    finally:
        stack.stop()


#: A secret in the stack's Kafka connection: tests assert it appears on no page and in no API answer.
STACK_SECRET = "s3cr3t-" + "stack-Pq7"


@pytest.fixture(scope="module")
def spark_cluster():
    """A Spark standalone cluster on loopback: a master and two workers of one core each (pyspark's spark-class)."""
    from airflow_kafka_stream.devstack.spark_cluster import start_local_cluster

    cluster = start_local_cluster(workers=2, cores_per_worker=1, worker_memory="1g")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def executor_environment() -> str:
    """This environment packed for executors (--archives); cached by content across runs."""
    from airflow_kafka_stream.cluster.environment import pack_executor_environment

    return str(pack_executor_environment())
