"""Where a job runs and what its job home is called for Spark (core.cluster): table-driven, one reason per case."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.cluster import check_job_home_reach, hadoop_settings, placement, spark_url
from airflow_kafka_stream.errors import InvalidInputError

PLACEMENTS = [
    # (id, master, deploy mode, executors elsewhere, driver elsewhere, why)
    ("local", "local[2]", None, False, False, "everything in the driver's JVM"),
    ("loopback", "spark://127.0.0.1:7077", None, False, False, "a standalone cluster on this machine"),
    ("localhost", "spark://localhost:7077", "client", False, False, "localhost is loopback too"),
    ("remote-standalone", "spark://spark-master:7077", None, True, False, "client mode: the driver stays here"),
    ("ha-standalone", "spark://127.0.0.1:7077,other:7077", None, True, False, "one remote master is enough"),
    ("yarn-client", "yarn", "client", True, False, "executors in YARN containers"),
    ("yarn-cluster", "yarn", "cluster", True, True, "the driver in the application master"),
    ("k8s-cluster", "k8s://https://api:6443", "cluster", True, True, "the driver in a pod"),
]


@pytest.mark.parametrize(("master", "mode", "executors", "driver"),
                         [case[1:5] for case in PLACEMENTS], ids=[case[0] for case in PLACEMENTS])
def test_placement(master, mode, executors, driver):
    where = placement(master, mode)
    assert (where.executors_elsewhere, where.driver_elsewhere) == (executors, driver)


@pytest.mark.parametrize(("master", "mode", "match"), [
    ("local[2]", "cluster", "deploy mode cluster does not apply"),
    ("mesos://m:5050", None, "is not one of local"),
    ("yarn", "detached", "neither client nor cluster"),
])
def test_placement_refusals(master, mode, match):
    with pytest.raises(InvalidInputError, match=match):
        placement(master, mode)


NAMES = [
    # (id, fsspec name, storage options, Spark name, why)
    ("local-path", "/data/jobs/a", None, "file:///data/jobs/a", "a bare path is the cluster's default FS (HDFS)"),
    ("local-dots", "/data/jobs/../jobs/a/", None, "file:///data/jobs/a", "one name for one directory"),
    ("file-url", "file:///data/a", None, "file:///data/a", "already a local URL"),
    ("s3", "s3://bucket/jobs/a", None, "s3a://bucket/jobs/a", "Hadoop's S3 connector is s3a"),
    ("s3a", "s3a://bucket/jobs/a", None, "s3a://bucket/jobs/a", "the same bucket under either name"),
    ("gcs", "gcs://bucket/a", None, "gs://bucket/a", "the GCS connector's scheme"),
    ("az", "az://container/a", {"account_name": "acct"}, "abfss://container@acct.dfs.core.windows.net/a",
     "ABFS names the storage account in the host"),
    ("hdfs", "hdfs://nn:8020/a", None, "hdfs://nn:8020/a", "the same on both sides"),
]


@pytest.mark.parametrize(("url", "options", "expected"), [case[1:4] for case in NAMES], ids=[c[0] for c in NAMES])
def test_spark_url(url, options, expected):
    assert spark_url(url, options) == expected


def test_spark_url_refuses_what_it_cannot_name():
    with pytest.raises(InvalidInputError, match="relative path"):
        spark_url("jobs/a")
    with pytest.raises(InvalidInputError, match="account_name"):
        spark_url("az://container/a", {})


def test_s3_storage_options_reach_hadoop_with_secrets_apart():
    options = {"key": "AKIA", "secret": "s3cr3t", "token": "tok",
               "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1", "verify": False},
               "config_kwargs": {"retries": 3}}
    found = hadoop_settings("s3://bucket/a", options)
    assert found.settings == {
        "fs.s3a.access.key": "AKIA", "fs.s3a.endpoint": "http://127.0.0.1:9000", "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.path.style.access": "true", "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"}
    assert found.secrets == {"fs.s3a.secret.key": "s3cr3t", "fs.s3a.session.token": "tok"}
    assert found.unmapped == ("client_kwargs.verify", "config_kwargs"), "named, never silently dropped"
    assert hadoop_settings("/data/a", {}).all == {}


REACH = [
    # (id, job home, master, mode, shared, refused, why)
    ("local-mode", "/data/a", "local[2]", None, False, False, "one machine"),
    ("loopback-cluster", "/data/a", "spark://127.0.0.1:7077", None, False, False, "every process on this machine"),
    ("remote-executors", "/data/a", "spark://master:7077", None, False, True, "executors write state elsewhere"),
    ("file-url", "file:///data/a", "yarn", "client", False, True, "file:// is as local as a path"),
    ("declared-shared", "/mnt/nfs/a", "yarn", "cluster", True, False, "the user says every node mounts it"),
    ("object-store", "s3://bucket/a", "k8s://https://api", "cluster", False, False, "reachable from anywhere"),
]


@pytest.mark.parametrize(("url", "master", "mode", "shared", "refused"), [c[1:6] for c in REACH],
                         ids=[c[0] for c in REACH])
def test_job_home_reach(url, master, mode, shared, refused):
    if refused:
        with pytest.raises(InvalidInputError, match=r"on this machine's disk.*job_home_shared=True"):
            check_job_home_reach(url, placement(master, mode), shared)
    else:
        check_job_home_reach(url, placement(master, mode), shared)
