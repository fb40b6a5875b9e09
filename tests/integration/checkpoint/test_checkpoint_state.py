"""`checkpoint state` on checkpoints real Spark wrote (stateful_checkpoints.py): what a user checks before an
upgrade — the operators, their stores, partitions, versions and key and value schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.cli_helpers import cli
from tests.integration.stateful_checkpoints import BUILD_CONF, LAST_BATCH, build

pytestmark = pytest.mark.integration

PARTITIONS = int(BUILD_CONF["spark.sql.shuffle.partitions"])


@pytest.fixture(scope="module")
def built(tmp_path_factory, spark) -> Path:
    root = tmp_path_factory.mktemp("state-listing")
    subprocess.run([sys.executable, "-m", "tests.integration.stateful_checkpoints", str(root)], cwd=ROOT,
                   check=True, timeout=900, capture_output=True)
    build(root, ("stateless",), spark)
    return root


def listing(capsys, built: Path, kind: str) -> dict:
    result = cli(capsys, "checkpoint", "state", "--checkpoint", str(built / kind / "checkpoint"), "--json")
    assert result.code == 0, result.out + result.err
    return result.json()


def schemas(operator: dict) -> list[tuple[str, str, int, str, str]]:
    return [(operator["name"], store["name"], store["partitions"], family["key_schema"], family["value_schema"])
            for store in operator["stores"] for family in store["column_families"]]


def test_hdfs_store_with_a_dedupe_and_a_count(capsys, built: Path) -> None:
    state = listing(capsys, built, "hdfs")
    assert (state["stateful"], state["batch_id"], state["problems"]) == (True, LAST_BATCH, [])
    count, dedupe = state["operators"]
    assert (count["operator_id"], dedupe["operator_id"]) == (0, 1)
    assert schemas(count) == [("stateStoreSave", "default", PARTITIONS, "(k int)", "(count bigint)")]
    assert schemas(dedupe) == [("dedupe", "default", PARTITIONS, "(v string)", "(__dummy__ void)")]
    for operator in (count, dedupe):
        assert operator["metadata_version"] == 1
        assert operator["last_version"] == LAST_BATCH + 1  # the state batch LAST_BATCH wrote
        assert operator["first_version"] <= operator["last_version"]
        assert operator["batch_range"] == [operator["first_version"] - 1, LAST_BATCH]

    text = cli(capsys, "checkpoint", "state", "--checkpoint", str(built / "hdfs" / "checkpoint")).out
    assert "state           2 stateful operators" in text
    assert "operator 0  stateStoreSave" in text and "operator 1  dedupe" in text
    assert f"store default, {PARTITIONS} partitions" in text and "key    (k int)" in text


@pytest.mark.parametrize("kind", ["rocksdb", "changelog"])
def test_rocksdb_stores(capsys, built: Path, kind: str) -> None:
    state = listing(capsys, built, kind)
    (count,) = state["operators"]
    assert schemas(count) == [("stateStoreSave", "default", PARTITIONS, "(k int)", "(count bigint)")]
    assert count["last_version"] == LAST_BATCH + 1 and state["problems"] == []


def test_stateless(capsys, built: Path) -> None:
    state = listing(capsys, built, "stateless")
    assert (state["stateful"], state["operators"]) == (False, [])
    out = cli(capsys, "checkpoint", "state", "--checkpoint", str(built / "stateless" / "checkpoint")).out
    assert "stateless: no state/ directory" in out


def test_a_damaged_metadata_file_is_that_operator_s_problem(capsys, built: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "hdfs-copy"
    shutil.copytree(built / "hdfs" / "checkpoint", copy)
    (copy / "state/1/_metadata/metadata").write_text("v1\n{not json")
    (copy / "state/1/_metadata/.metadata.crc").unlink(missing_ok=True)
    result = cli(capsys, "checkpoint", "state", "--checkpoint", str(copy))
    assert result.code == 1
    assert "operator 0  stateStoreSave" in result.out  # the other operator is still listed
    assert "operator 1  (name unknown)" in result.out and "unreadable v1 operator metadata" in result.out
