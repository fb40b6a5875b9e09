"""core.lineage: OpenLineage names of topics and sinks, the parent link, when the client counts as configured."""

from __future__ import annotations

import os

import pytest

from airflow_kafka_stream.core.lineage import (
    DatasetId,
    ParentRun,
    client_configured,
    due,
    end_event_type,
    job_datasets,
    kafka_namespace,
    offset_positions,
    parse_parent,
    sink_dataset,
)
from airflow_kafka_stream.core.offsets import TopicPartition

RUN = "0190a0c1-0000-7000-8000-000000000001"
ROOT = "0190a0c1-0000-7000-8000-000000000002"


@pytest.mark.parametrize(("servers", "namespace"), [
    pytest.param("b1:9092", "kafka://b1:9092", id="one-server"),
    pytest.param("b1:9092, b2:9092", "kafka://b1:9092", id="the-first-of-several-names-the-cluster"),
    pytest.param("SASL_SSL://b1:9093", "kafka://b1:9093", id="a-listener-prefix-is-not-part-of-the-name"),
])
def test_a_kafka_namespace_is_its_first_bootstrap_server(servers, namespace):
    assert kafka_namespace(servers) == namespace


@pytest.mark.parametrize(("path", "dataset"), [
    pytest.param("/data/out", DatasetId("file", "/data/out"), id="local-path: namespace file, absolute name"),
    pytest.param("file:///data/out", DatasetId("file", "/data/out"), id="file-url: the same dataset"),
    pytest.param("s3://lake/orders/out", DatasetId("s3://lake", "orders/out"), id="s3: bucket namespace, key name"),
    pytest.param("s3a://lake/orders", DatasetId("s3://lake", "orders"), id="s3a-is-s3: one dataset, whoever writes"),
    pytest.param("gcs://lake/x", DatasetId("gs://lake", "x"), id="gcs-is-gs"),
    pytest.param("hdfs://nn:8020/x/y", DatasetId("hdfs://nn:8020", "x/y"), id="hdfs: namenode namespace"),
    pytest.param("kafka://b1:9092/out-topic", DatasetId("kafka://b1:9092", "out-topic"), id="a-topic-sink"),
    pytest.param("kafka://b1:9092,b2:9092/out", DatasetId("kafka://b1:9092", "out"), id="the-kafka-sinks-path"),
])
def test_a_sink_is_named_by_its_storage(path, dataset):
    assert sink_dataset(path) == dataset


def test_a_relative_sink_path_is_named_absolute():
    assert sink_dataset("out") == DatasetId("file", os.path.abspath("out"))


@pytest.mark.parametrize(("spec", "given", "inputs", "outputs"), [
    pytest.param({"kafka": {"bootstrap.servers": "b:1"}, "topics": ["a", "b"], "sink": {"path": "/o"}}, {},
                 [DatasetId("kafka://b:1", "a"), DatasetId("kafka://b:1", "b")], [DatasetId("file", "/o")],
                 id="job.json: what the driver declared wins"),
    pytest.param({}, {"topics": ["a"], "sink_path": "/o", "bootstrap_servers": "b:1"},
                 [DatasetId("kafka://b:1", "a")], [DatasetId("file", "/o")], id="no-job.json: what the task was given"),
    pytest.param({"kafka": {"bootstrap.servers": "b:1"}, "subscribe_pattern": "a.*"}, {}, [], [],
                 id="a-pattern-names-no-topic: never a guess"),
    pytest.param({"topics": ["a"], "sink_path": "/old"}, {}, [], [DatasetId("file", "/old")],
                 id="no-servers: no topic dataset; an old job.json's sink_path still names the sink"),
])
def test_a_jobs_datasets(spec, given, inputs, outputs):
    assert job_datasets(spec, **given) == (inputs, outputs)


def test_positions_are_the_next_offset_of_each_partition_per_topic():
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 0): 5, TopicPartition("b", 0): 3}
    assert offset_positions(offsets) == {"a": {"0": 5}, "b": {"0": 3, "1": 7}}
    assert offset_positions(None) == {}


@pytest.mark.parametrize(("text", "root", "parent"), [
    pytest.param(f"default/dag.task/{RUN}", None, ParentRun("default", "dag.task", RUN), id="the-macros-shape"),
    pytest.param(f"ns/dag.task/{RUN}", f"ns/dag/{ROOT}",
                 ParentRun("ns", "dag.task", RUN, ParentRun("ns", "dag", ROOT)), id="with-its-dag-run-as-root"),
    pytest.param(f"ns/a/b/{RUN}", None, ParentRun("ns", "a/b", RUN), id="a-job-name-with-a-slash-keeps-it"),
    pytest.param("ns/dag.task/not-a-uuid", None, None, id="a-run-id-that-is-no-uuid: no link rather than a broken one"),
    pytest.param("dag.task", None, None, id="not-three-parts"),
    pytest.param("", None, None, id="unset"),
])
def test_the_parent_link(text, root, parent):
    assert parse_parent(text, root) == parent


@pytest.mark.parametrize(("env", "files", "configured"), [
    pytest.param({}, [], False, id="nothing: off (the client would print to the console)"),
    pytest.param({"OPENLINEAGE_URL": "http://m:5000"}, [], True, id="the-url-variable"),
    pytest.param({"OPENLINEAGE_CONFIG": "/etc/ol.yml"}, [], True, id="a-config-file-named"),
    pytest.param({"OPENLINEAGE__TRANSPORT__TYPE": "http"}, [], True, id="the-dynamic-transport-variables"),
    pytest.param({"OPENLINEAGE__TRANSPORT": '{"type": "http"}'}, [], True, id="the-transport-as-json"),
    pytest.param({}, ["/home/u/.openlineage/openlineage.yml"], True, id="an-openlineage-yml-found"),
    pytest.param({"OPENLINEAGE_URL": "http://m", "OPENLINEAGE_DISABLED": "true"}, [], False, id="disabled-wins"),
    pytest.param({"OPENLINEAGE__TRANSPORT__TYPE": ""}, [], False, id="an-empty-variable-configures-nothing"),
])
def test_when_the_client_counts_as_configured(env, files, configured):
    assert client_configured(env, files) is configured


@pytest.mark.parametrize(("failed", "aborted", "kind"), [
    pytest.param(False, False, "COMPLETE", id="a-drained-stop-completes-the-run"),
    pytest.param(True, False, "FAIL", id="an-error-fails-it (a failed query, a fence)"),
    pytest.param(False, True, "ABORT", id="taken-over-or-killed: stopped abnormally, not completed"),
    pytest.param(True, True, "FAIL", id="an-error-is-said-first"),
])
def test_how_a_run_ends(failed, aborted, kind):
    assert end_event_type(failed, aborted) == kind


def test_running_events_are_due_at_most_once_per_interval():
    assert due(100.0, None, 60) and not due(130.0, 100.0, 60) and due(160.0, 100.0, 60)
