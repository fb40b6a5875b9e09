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
        pytest.param("sasl.username alice\n", {"sasl.username": "alice"},
                     id="4-whitespace-separates-as-in-javas-properties-format"),
        pytest.param('sasl.jaas.config=PlainLoginModule required \\\n    username="a" \\\n    password="p";\nx=1\n',
                     {"sasl.jaas.config": 'PlainLoginModule required username="a" password="p";', "x": "1"},
                     id="5-a-trailing-backslash-continues-the-line"),
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
        pytest.param("a=1\n=pw-s3cret\n", "line 2", id="3-a-line-without-key-is-named-by-number-only"),
        pytest.param("a=1\nsasl.password=x \\\n", "line 2", id="4-a-continuation-into-nothing"),
    ],
)
def test_read_properties_refuses(tmp_path, text, needle):
    path = tmp_path / "client.properties"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InvalidInputError, match=needle) as info:
        read_properties(str(path))
    assert "s3cret" not in str(info.value), "a malformed line may hold a secret: its text is never shown"


def test_context_prefers_arguments_and_drops_secrets_from_job_json(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "job.json").write_text(json.dumps({
        "group": "g-json", "topics": ["t"], "sink_path": "/out",
        "kafka": {"bootstrap.servers": "json:9092", "sasl.password": "leaked", "security.protocol": "SASL_SSL",
                  "sasl.mechanism": "PLAIN"},
    }))
    ctx = build_context(job_home=str(tmp_path), checkpoint="/ck", bootstrap_servers="arg:9092",
                        client_config={"sasl.username": "u", "sasl.password": "from-file"})
    assert ctx.kafka_config == {"bootstrap.servers": "arg:9092", "security.protocol": "SASL_SSL",
                                "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "from-file"}
    assert (ctx.group, ctx.topics, ctx.sink_path) == ("g-json", ["t"], "/out")


def test_context_needs_a_job(tmp_path):
    """The operation names its setting; the CLI adds its own flag for it (see cli.flags.refusal_text)."""
    with pytest.raises(InvalidInputError, match="job_home") as info:
        build_context()
    assert info.value.setting == "job_home"


def job_home(tmp_path, kafka=None):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "job.json").write_text(json.dumps({"group": "g-json", "kafka": kafka or {"bootstrap.servers": "b:1"}}))
    return str(tmp_path)


@pytest.mark.parametrize("option", ["checkpoint", "bootstrap_servers", "group", "sink_path"])
def test_an_empty_argument_is_refused_not_taken_as_missing(tmp_path, option):
    with pytest.raises(InvalidInputError, match=f"{option} is empty") as info:
        build_context(job_home=job_home(tmp_path), **{option: " " if option == "group" else ""})
    assert info.value.setting == option


def test_an_empty_job_home_is_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="job_home is empty"):
        build_context(job_home="", checkpoint=str(tmp_path))


@pytest.mark.parametrize(("option", "url"), [("checkpoint", "ftp://h/ck"), ("sink_path", "s3://")])
def test_unusable_urls_are_refused_before_anything_opens(tmp_path, option, url):
    with pytest.raises(InvalidInputError, match="not supported|no bucket"):
        build_context(job_home=job_home(tmp_path), **{option: url})


def test_client_settings_are_checked_up_front_without_their_secrets(tmp_path):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="jaas-pw";'
    with pytest.raises(InvalidInputError, match="sasl.username") as info:
        build_context(job_home=job_home(tmp_path), client_config={"sasl.jaas.config": jaas})
    assert "jaas-pw" not in str(info.value)


def test_a_command_without_kafka_does_not_check_client_settings(tmp_path):
    ctx = build_context(job_home=job_home(tmp_path, {"bootstrap.servers": "b:1", "no.such": "1"}),
                        checkpoint=str(tmp_path), uses_kafka=False)
    assert ctx.kafka_config["no.such"] == "1"


def test_context_reads_the_sink_kind_and_flags_override_it(tmp_path):
    """An idempotent sink has no _spark_metadata to extend: the context gives no file-sink path for it."""
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "job.json").write_text(json.dumps({"sink": {"kind": "idempotent", "path": "/out"}}))
    ctx = build_context(job_home=str(tmp_path), checkpoint="/ck")
    assert (ctx.sink.kind, ctx.sink.path, ctx.sink_path) == ("idempotent", "/out", None)
    assert build_context(job_home=str(tmp_path), checkpoint="/ck", sink_kind="file").sink_path == "/out"
    assert build_context(job_home=str(tmp_path), checkpoint="/ck", sink_kind="none").sink is None
    with pytest.raises(InvalidInputError, match="sink_path is empty"):
        build_context(job_home=str(tmp_path), checkpoint="/ck", sink_path="")
