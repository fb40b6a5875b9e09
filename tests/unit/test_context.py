"""Client settings come from a properties file (as with Kafka's own tools); job.json never holds secrets."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.ops.context import build_context, read_properties


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a=1\nb = two\n", {"a": "1", "b": "two"}, id="1-key-equals-value-with-spaces-trimmed"),
        pytest.param("# comment\n! also\n\nx:y\n", {"x": "y"}, id="2-comments-blank-lines-and-colon-separator"),
        pytest.param("sasl.jaas.config=a=b c=d\n", {"sasl.jaas.config": "a=b c=d"},
                     id="3-only-the-first-separator-splits"),
    ],
)
def test_read_properties(tmp_path, text, expected):
    path = tmp_path / "client.properties"
    path.write_text(text)
    assert read_properties(str(path)) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("novalue\n", "line 1", id="1-a-line-without-separator-is-named"),
        pytest.param(None, "cannot read", id="2-a-missing-file-is-named"),
    ],
)
def test_read_properties_refuses(tmp_path, text, needle):
    path = tmp_path / "client.properties"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InvalidInputError, match=needle):
        read_properties(str(path))


def test_context_prefers_arguments_and_drops_secrets_from_job_json(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "job.json").write_text(json.dumps({
        "group": "g-json", "topics": ["t"], "sink_path": "/out",
        "kafka": {"bootstrap.servers": "json:9092", "sasl.password": "leaked", "security.protocol": "SASL_SSL"},
    }))
    ctx = build_context(job_home=str(tmp_path), checkpoint="/ck", bootstrap_servers="arg:9092",
                        client_config={"sasl.password": "from-file"})
    assert ctx.kafka_config == {"bootstrap.servers": "arg:9092", "security.protocol": "SASL_SSL",
                                "sasl.password": "from-file"}
    assert (ctx.group, ctx.topics, ctx.sink_path) == ("g-json", ["t"], "/out")


def test_context_needs_a_job(tmp_path):
    with pytest.raises(InvalidInputError, match="--job-home"):
        build_context()


def test_context_reads_the_sink_kind_and_flags_override_it(tmp_path):
    """An idempotent sink has no _spark_metadata to extend: the context gives no file-sink path for it."""
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "job.json").write_text(json.dumps({"sink": {"kind": "idempotent", "path": "/out"}}))
    ctx = build_context(job_home=str(tmp_path), checkpoint="/ck")
    assert (ctx.sink.kind, ctx.sink.path, ctx.sink_path) == ("idempotent", "/out", None)
    assert build_context(job_home=str(tmp_path), checkpoint="/ck", sink_kind="file").sink_path == "/out"
    assert build_context(job_home=str(tmp_path), checkpoint="/ck", sink_kind="none").sink is None
    with pytest.raises(InvalidInputError, match="--sink-path is empty"):
        build_context(job_home=str(tmp_path), checkpoint="/ck", sink_path="")
