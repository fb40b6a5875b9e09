"""The codec PySpark's streaming source runner uses for this source's offsets (see source/offsets_text.py).
Stored offsets are checked byte for byte against real Spark in tests/integration/source/test_offsets_text.py."""

from __future__ import annotations

import json
import types

import pytest

from airflow_kafka_stream.source import offsets_text
from airflow_kafka_stream.source.offsets_text import OffsetsJson

SPACED = '{"orders": {"0": 23, "1": 31}}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param({"t": {"0": 5, "10": 7}}, '{"t":{"0":5,"10":7}}', id="1-reader-made-offsets-are-compact"),
        pytest.param({"maxRows": 100, "_type": "ReadMaxRows"}, '{"maxRows":100,"_type":"ReadMaxRows"}',
                     id="2-read-limits-too-(the-JVM-parses-them)"),
    ],
)
def test_dumps_renders_compactly(value, text):
    assert OffsetsJson.dumps(value) == text


def test_offsets_spark_handed_in_go_back_with_spark_s_own_text():
    """"No new data" is the reader returning start unchanged: Spark must see its text, or it plans a batch."""
    start = OffsetsJson.loads(SPACED)
    assert start == {"orders": {"0": 23, "1": 31}}
    assert OffsetsJson.dumps(start) == SPACED


def test_changed_offsets_are_rendered_not_echoed():
    start = OffsetsJson.loads(SPACED)
    start["orders"]["1"] = 40
    assert OffsetsJson.dumps(start) == '{"orders":{"0":23,"1":40}}'


def test_values_other_than_objects_pass_through():
    assert OffsetsJson.loads("null") is None and OffsetsJson.loads(b"[1, 2]") == [1, 2]


def runner_module() -> types.ModuleType:
    module = types.ModuleType("__main__")
    module.json = json
    module.latest_offset_admission_control_func = lambda *args: None
    return module


def test_installs_only_into_the_streaming_source_runner(monkeypatch):
    runner, other = runner_module(), types.ModuleType("__main__")
    other.json = json
    monkeypatch.setitem(offsets_text.sys.modules, "__main__", other)
    monkeypatch.delitem(offsets_text.sys.modules, offsets_text.RUNNER_MODULE, raising=False)
    assert offsets_text.install_in_runner() is False and other.json is json
    monkeypatch.setitem(offsets_text.sys.modules, "__main__", runner)
    assert offsets_text.install_in_runner() is True and runner.json is OffsetsJson
    assert offsets_text.install_in_runner() is True, "a second reader in the same process finds it installed"


@pytest.mark.parametrize(("high", "offset", "behind"), [(10, 4, 6), (10, 10, 0), (4, 10, 0), ("12", "2", 10)])
def test_the_lag_of_a_partition_is_never_negative(high, offset, behind):
    """The one lag rule every report uses (verify, health, metrics, progress, the sampler, the source)."""
    from airflow_kafka_stream.core.offsets import records_behind

    assert records_behind(high, offset) == behind
