"""The job's sink kind: read from job.json (new and legacy shapes) and overridden by flags."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.sink import FILE, IDEMPOTENT, Sink, resolve_sink, sink_from_spec
from airflow_kafka_stream.errors import InvalidInputError

FILE_SINK = Sink(FILE, "/out")
IDEM_SINK = Sink(IDEMPOTENT, "/out")


@pytest.mark.parametrize("spec, expected", [
    pytest.param({"sink": {"kind": "idempotent", "path": "/out"}}, IDEM_SINK, id="1-recorded-kind"),
    pytest.param({"sink": {"kind": "idempotent", "path": None}}, Sink(IDEMPOTENT), id="2-idempotent-needs-no-path"),
    pytest.param({"sink": {"kind": "file", "path": "/out"}}, FILE_SINK, id="3-file-sink"),
    pytest.param({"sink_path": "/out"}, FILE_SINK, id="4-legacy-sink-path-is-a-file-sink-as-before"),
    pytest.param({"sink": {"kind": "idempotent", "path": "/a"}, "sink_path": "/b"}, Sink(IDEMPOTENT, "/a"),
                 id="5-new-shape-wins-over-a-leftover-legacy-key"),
    pytest.param({}, None, id="6-nothing-recorded"),
    pytest.param({"sink": None, "sink_path": None}, None, id="7-explicit-nulls"),
    pytest.param({"sink": {"kind": None, "path": None}}, None, id="8-no-kind"),
])
def test_sink_from_spec(spec, expected):
    assert sink_from_spec(spec) == expected


@pytest.mark.parametrize("spec, message", [
    pytest.param({"sink": {"kind": "jdbc", "path": "/out"}}, "unknown sink kind 'jdbc'", id="1-unknown-kind"),
    pytest.param({"sink": {"kind": "file"}}, "needs its output path", id="2-file-sink-without-path"),
    pytest.param({"sink": "/out"}, "must be an object", id="3-not-an-object"),
])
def test_sink_from_spec_refuses_a_broken_job_json(spec, message):
    with pytest.raises(InvalidInputError, match=message):
        sink_from_spec(spec)


@pytest.mark.parametrize("recorded, kind, path, expected", [
    pytest.param(IDEM_SINK, None, None, IDEM_SINK, id="1-no-flags-keep-the-recorded-sink"),
    pytest.param(IDEM_SINK, None, "/elsewhere", Sink(FILE, "/elsewhere"), id="2-a-path-alone-names-a-file-sink"),
    pytest.param(FILE_SINK, "idempotent", None, IDEM_SINK, id="3-kind-alone-keeps-the-recorded-path"),
    pytest.param(FILE_SINK, "none", None, None, id="4-none-says-no-sink-log"),
    pytest.param(None, "idempotent", None, Sink(IDEMPOTENT), id="5-idempotent-without-any-path"),
    pytest.param(None, "file", "/x", Sink(FILE, "/x"), id="6-file-with-path"),
    pytest.param(None, None, None, None, id="7-nothing-anywhere"),
])
def test_resolve_sink(recorded, kind, path, expected):
    assert resolve_sink(recorded, kind, path) == expected


@pytest.mark.parametrize("recorded, kind, path, message", [
    pytest.param(FILE_SINK, None, "", "sink_path is empty", id="1-empty-path-is-not-use-the-recorded-one"),
    pytest.param(FILE_SINK, None, "  ", "set sink_kind to idempotent", id="2-blank-path-names-the-fix"),
    pytest.param(None, "none", "/x", "contradicts", id="3-none-with-a-path"),
    pytest.param(None, "file", None, "give it as sink_path", id="4-file-sink-needs-a-path"),
    pytest.param(None, "delta", None, "unknown sink_kind 'delta'", id="5-unknown-kind"),
])
def test_resolve_sink_refuses(recorded, kind, path, message):
    """Each refusal names the setting (sink_path or sink_kind), which the CLI maps to its flag."""
    with pytest.raises(InvalidInputError, match=message) as info:
        resolve_sink(recorded, kind, path)
    assert info.value.setting in ("sink_path", "sink_kind")


def test_describe_says_what_was_assumed():
    assert "_spark_metadata" in FILE_SINK.describe()
    assert "no batch log" in IDEM_SINK.describe() and "batch id" in IDEM_SINK.describe()
    assert IDEM_SINK.to_json() == {"kind": "idempotent", "path": "/out"}


def test_a_kafka_sink_that_skips_replays_is_recorded_kept_and_described():
    skipping = Sink("kafka", "kafka://b:9092/out", skips_replays=True)
    assert skipping.to_json() == {"kind": "kafka", "path": "kafka://b:9092/out", "skip_replays": True}
    assert sink_from_spec({"sink": skipping.to_json()}) == skipping
    assert resolve_sink(skipping, "kafka", None) == skipping, "an override of the same kind keeps the choice"
    assert not skipping.writes_replays and Sink("kafka").writes_replays
    assert "skipped (skip_replays)" in skipping.describe() and "written to the topic again" in Sink("kafka").describe()
    with pytest.raises(InvalidInputError, match="skip_replays is the Kafka sink's") as refused:
        Sink("idempotent", skips_replays=True)
    assert refused.value.settings == ("skip_replays",)


def test_a_job_config_refuses_skip_replays_without_the_kafka_sink():
    from airflow_kafka_stream.runtime import StreamConfig

    config = StreamConfig(job_name="j", bootstrap_servers="b:9092", group_id="g", topics=["t"], skip_replays=True)
    with pytest.raises(InvalidInputError, match="give output_topic"):
        config.validate()
    kafka = StreamConfig(job_name="j", bootstrap_servers="b:9092", group_id="g", topics=["t"], sink_kind="kafka",
                         sink_path="kafka://b:9092/out", skip_replays=True)
    assert kafka.sink() == Sink("kafka", "kafka://b:9092/out", skips_replays=True)
