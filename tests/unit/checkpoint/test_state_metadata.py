"""The state metadata parser on bytes Spark 4.2 wrote (tests/unit/data/spark42_state), the listing of a checkpoint
laid out as Spark lays it out, and the comparison an upgrade reports."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from airflow_kafka_stream.checkpoint.state_info import read_state
from airflow_kafka_stream.core.state_metadata import (
    StateOperator,
    StateStore,
    parse_operator_metadata,
    state_differences,
    state_file_version,
)
from airflow_kafka_stream.core.state_schema import ColumnFamily, java_utf, parse_schema_file, schema_text, type_text
from airflow_kafka_stream.errors import CheckpointFormatError
from airflow_kafka_stream.render.checkpoint import state_text

DATA = Path(__file__).parents[1] / "data" / "spark42_state"


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def utf(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">H", len(raw)) + raw


def test_operator_metadata_v1_of_an_aggregation() -> None:
    meta = parse_operator_metadata(fixture("aggregate.metadata"))
    assert (meta.version, meta.operator_id, meta.operator_name) == (1, 0, "stateStoreSave")
    assert [(s.name, s.num_partitions, s.schema_paths) for s in meta.stores] == [("default", 2, ())]


def test_operator_metadata_v2_of_transform_with_state() -> None:
    meta = parse_operator_metadata(fixture("transform_with_state.metadata"))
    assert (meta.version, meta.operator_name) == (2, "transformWithStateInPySparkExec")
    store = meta.stores[0]
    assert (store.name, store.num_partitions) == ("default", 3)
    assert len(store.schema_paths) == 1 and "/_stateSchema/default/0_" in store.schema_paths[0]
    assert [v["stateName"] for v in meta.properties["stateVariables"]] == ["count", "seen"]


@pytest.mark.parametrize("data", [b"v3\n{}", b"v1\nnot json", b"v1\n{\"stateStoreInfo\": []}", b"\xff\xfe"])
def test_unknown_or_broken_operator_metadata_is_a_format_error(data: bytes) -> None:
    with pytest.raises(CheckpointFormatError):
        parse_operator_metadata(data, "state/0/_metadata/metadata")


def test_schema_v2_of_a_count_by_string_key() -> None:
    (family,) = parse_schema_file(fixture("count_by_user.schema"))
    assert family.name == "default"
    assert schema_text(family.key) == "(user_id string)"
    assert schema_text(family.value) == "(count bigint)"


def test_schema_v2_of_a_dedupe_has_spark_s_dummy_value() -> None:
    (family,) = parse_schema_file(fixture("dedupe.schema"))
    assert (schema_text(family.key), schema_text(family.value)) == ("(v string)", "(__dummy__ void)")


def test_schema_v3_lists_every_state_variable() -> None:
    families = parse_schema_file(fixture("transform_with_state.schema"))
    shown = {f.name: (schema_text(f.key), schema_text(f.value), f.internal) for f in families}
    assert shown == {
        "$rowCounter_seen": ("(user_id string)", "(count bigint)", True),
        "count": ("(user_id string)", "(n bigint)", False),
        "seen": ("(user_id string)", "(amount bigint)", False),
    }


def test_schema_v1_as_spark_s_tests_write_it() -> None:
    key = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": False, "metadata": {}}]}
    value = {"type": "struct", "fields": [{"name": "s", "type": {"type": "array", "elementType": "integer",
                                                                  "containsNull": True}, "nullable": True,
                                           "metadata": {}}]}
    (family,) = parse_schema_file(utf("v1") + utf(json.dumps(key)) + utf(json.dumps(value)))
    assert (schema_text(family.key), schema_text(family.value)) == ("(id bigint)", "(s array<int>)")


def test_schema_v2_split_into_several_chunks() -> None:
    key = json.dumps({"type": "struct", "fields": [{"name": "k", "type": "string", "nullable": True,
                                                    "metadata": {}}]})
    value = json.dumps({"type": "struct", "fields": []})
    chunked = struct.pack(">i", 2) + utf(key[:10]) + utf(key[10:])
    (family,) = parse_schema_file(utf("v2") + chunked + struct.pack(">i", 1) + utf(value))
    assert (schema_text(family.key), schema_text(family.value)) == ("(k string)", "()")


@pytest.mark.parametrize("data", [b"", b"\x00\x02v9", b"\x00\x02v2\x00\x00\x00\x01\x00\x05{\"typ", b"garbage"])
def test_unreadable_schema_files_are_format_errors(data: bytes) -> None:
    with pytest.raises(CheckpointFormatError):
        parse_schema_file(data)


def test_types_are_named_as_spark_sql_names_them() -> None:
    assert [type_text(t) for t in ("integer", "long", "short", "byte", "null", "decimal(10,2)", "timestamp")] == [
        "int", "bigint", "smallint", "tinyint", "void", "decimal(10,2)", "timestamp"]
    assert type_text({"type": "map", "keyType": "string", "valueType": "long"}) == "map<string,bigint>"
    assert type_text({"type": "struct", "fields": [{"name": "a", "type": "integer"}]}) == "struct<a:int>"


def test_java_modified_utf8() -> None:
    assert java_utf(b"a\xc0\x80b") == "a\x00b"
    assert java_utf("é".encode()) == "é"
    assert java_utf(b"\xed\xa0\xbd\xed\xb8\x80") == "\U0001f600"  # a character past U+FFFF as two surrogates


@pytest.mark.parametrize(("name", "version"), [("9.delta", 9), ("12.snapshot", 12), ("3.zip", 3),
                                               ("4.changelog", 4), ("5_0a1b-2c.zip", 5), ("schema", None),
                                               (".9.delta.crc", None), ("000123.sst", None)])
def test_state_file_versions(name: str, version: int | None) -> None:
    assert state_file_version(name) == version


def _write(path: Path, data: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _checkpoint(root: Path, batch: int = 8) -> Path:
    """A checkpoint laid out as Spark lays it out, with the captured metadata and schema files."""
    _write(root / "metadata", b'{"id":"00000000-0000-0000-0000-000000000001"}')
    for n in (batch - 1, batch):
        _write(root / "offsets" / str(n), b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n'
                                          b'{"logOffset":0}')
        _write(root / "commits" / str(n), b'v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_listing_a_checkpoint_with_an_unreadable_operator(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path / "cp")
    _write(root / "state/0/_metadata/metadata", fixture("aggregate.metadata"))
    _write(root / "state/0/0/_metadata/schema", fixture("count_by_user.schema"))
    for part, versions in ((0, (4, 5, 6)), (1, (6, 7, 9))):
        for version in versions:
            _write(root / f"state/0/{part}/{version}.delta")
    _write(root / "state/0/0/4.snapshot")
    _write(root / "state/1/_metadata/metadata", b"v7\n{}")  # a format this tool does not know
    _write(root / "state/1/0/9.zip")
    state = read_state(str(root))
    assert (state.stateful, state.batch_id, [op.operator_id for op in state.operators]) == (True, 8, [0, 1])
    aggregate, unknown = state.operators
    assert (aggregate.name, aggregate.first_version, aggregate.last_version, aggregate.batch_range) == (
        "stateStoreSave", 4, 9, (3, 8))
    assert [(s.name, s.partitions, schema_text(s.families[0].key)) for s in aggregate.stores] == [
        ("default", 2, "(user_id string)")]
    assert unknown.name is None and "unknown operator metadata version 'v7'" in unknown.problems[0]
    assert (unknown.first_version, unknown.last_version) == (9, 9)
    assert state.problems and "operator 1" in state.problems[0]
    text = state_text(state)
    assert "operator 0  stateStoreSave" in text and "key    (user_id string)" in text and "PROBLEM" in text


def test_transform_with_state_schema_is_found_after_the_checkpoint_moved(tmp_path: Path) -> None:
    """The v2 metadata names its schema file by an absolute URL of where the query first ran."""
    root = _checkpoint(tmp_path / "moved", batch=2)
    schema_name = json.loads(fixture("transform_with_state.metadata").split(b"\n", 1)[1])[
        "stateStoreInfo"][0]["stateSchemaFilePaths"][0].rsplit("/", 1)[-1]
    _write(root / "state/0/_metadata/v2/0", fixture("transform_with_state.metadata"))
    _write(root / "state/0/_stateSchema/default" / schema_name, fixture("transform_with_state.schema"))
    _write(root / "state/0/0/3.zip")
    _write(root / "state/0/0/SSTs/000008-abc.sst")
    (op,) = read_state(str(root)).operators
    assert (op.metadata_version, op.name, op.last_version, op.problems) == (
        2, "transformWithStateInPySparkExec", 3, ())
    assert {f.name for f in op.stores[0].families} == {"$rowCounter_seen", "count", "seen"}


def test_a_stateless_checkpoint_says_so(tmp_path: Path) -> None:
    state = read_state(str(_checkpoint(tmp_path / "stateless")))
    assert (state.stateful, state.operators) == (False, ())
    assert "stateless: no state/ directory" in state_text(state)


def _op(op_id: int, name: str, key: tuple, value: tuple = (("count", "bigint"),), partitions: int = 200,
        families: tuple[ColumnFamily, ...] | None = None) -> StateOperator:
    store = StateStore("default", partitions, families or (ColumnFamily("default", key, value),))
    return StateOperator(op_id, name, (store,))


def test_state_differences_say_what_to_act_on() -> None:
    state = [_op(0, "stateStoreSave", (("user_id", "bigint"),))]
    assert state_differences(state, [_op(0, "stateStoreSave", (("user", "bigint"),))]) == []  # renamed column
    assert state_differences(state, [_op(0, "stateStoreSave", (("user_id", "string"),))]) == [
        "operator 0 (store default): key schema (user_id string) in the new version, (user_id bigint) in the state"]
    two = [_op(0, "stateStoreSave", (("user_id", "bigint"),)), _op(1, "dedupe", (("v", "string"),))]
    found = state_differences(state, two)
    assert found[0] == "the new version has 2 stateful operators, the checkpoint 1"
    assert "operator 1 (dedupe) is new" in found[1]
    assert state_differences(two, state)[-1] == "operator 1 (dedupe) is in the state but not in the new version"
    assert state_differences(state, [_op(0, "dedupe", (("user_id", "bigint"),))]) == [
        "operator 0: dedupe in the new version, stateStoreSave in the state"]
    assert state_differences(state, [_op(0, "stateStoreSave", (("user_id", "bigint"),), partitions=4)]) == [
        "operator 0 (store default): 4 partitions in the new version, 200 in the state"]


def test_state_differences_per_state_variable() -> None:
    def tws(*families: ColumnFamily) -> list[StateOperator]:
        return [_op(0, "transformWithStateInPySparkExec", (), families=families)]

    key = (("user_id", "string"),)
    old = tws(ColumnFamily("count", key, (("n", "bigint"),)), ColumnFamily("$rowCounter_seen", key, ()))
    new = tws(ColumnFamily("count", key, (("n", "int"),)), ColumnFamily("extra", key, (("x", "int"),)))
    assert state_differences(old, new) == [
        "operator 0 (store default, state variable count): value schema (n int) in the new version, (n bigint) "
        "in the state"]  # a variable added (extra) or dropped ($rowCounter_seen) loads
