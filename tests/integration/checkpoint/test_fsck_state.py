"""`checkpoint fsck` agrees with Spark about state: what it passes restarts, what it fails Spark cannot load.

Every layout Spark 4.2 writes is built by real Spark (see stateful_checkpoints.py):
the HDFS state store (``.delta`` files, ``.snapshot`` files written by
maintenance, two stateful operators), RocksDB without changelog checkpointing
(one ``N.zip`` per version, listing SST files under ``SSTs/``), RocksDB with
changelog checkpointing (``N.changelog`` per version, a ``.zip`` every few),
and a stateless query. Each damaged copy is checked twice: fsck must refuse it
(exit 1, naming the store) and the same query restarted on the same copy with
new input must fail to load its state; each intact copy must pass fsck and
restart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from airflow_kafka_stream.core.checkpoint_fsck import rocksdb_zip_ssts
from tests.conftest import ROOT
from tests.integration.cli_helpers import cli
from tests.integration.stateful_checkpoints import LAST_BATCH, add_input, build, start_query

pytestmark = pytest.mark.integration

VERSION = LAST_BATCH + 1  # the state version the next batch loads


@pytest.fixture(scope="module")
def built(tmp_path_factory, spark) -> Path:
    """One checkpoint per layout; the stateful ones from a Spark of their own (maintenance every second)."""
    root = tmp_path_factory.mktemp("state-layouts")
    subprocess.run([sys.executable, "-m", "tests.integration.stateful_checkpoints", str(root)], cwd=ROOT,
                   check=True, timeout=900, capture_output=True)
    build(root, ("stateless",), spark)
    return root


def copy_of(built: Path, kind: str, tmp_path: Path) -> Path:
    target = tmp_path / f"{kind}-copy"
    shutil.copytree(built / kind / "checkpoint", target)
    return target


def restart(spark, built: Path, kind: str, checkpoint: Path, tmp_path: Path) -> str | None:
    """Restart the kind's query on ``checkpoint`` with one new input file; Spark's error, or None."""
    add_input(built / kind / "input", f"restart-{tmp_path.name}")
    query = start_query(spark, kind, built / kind / "input", checkpoint, files_per_batch=1000)
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        return str(exc)
    return None


def fsck(capsys, checkpoint: Path):
    return cli(capsys, "checkpoint", "fsck", "--checkpoint", str(checkpoint))


def remove(checkpoint: Path, *relative: str) -> None:
    """Delete files and the Hadoop checksum beside each (as a lost file would leave no stale .crc)."""
    for rel in relative:
        path = checkpoint / rel
        path.unlink()
        crc = path.with_name(f".{path.name}.crc")
        if crc.exists():
            crc.unlink()


def remove_newest(kind_suffix: str, store: str) -> Callable[[Path], str]:
    """The file of the loaded version in ``store`` (and that version's base file, should maintenance have made one)."""
    def damage(checkpoint: Path) -> str:
        base_suffix = "snapshot" if kind_suffix == "delta" else "zip"
        newest = f"{store}/{VERSION}.{kind_suffix}"
        assert (checkpoint / newest).exists(), sorted(os.listdir(checkpoint / store))
        base = f"{store}/{VERSION}.{base_suffix}"
        remove(checkpoint, newest, *[base] if base != newest and (checkpoint / base).exists() else [])
        return store
    return damage


def remove_snapshots(store: str) -> Callable[[Path], str]:
    """Every snapshot of an HDFS store whose early deltas maintenance already purged."""
    def damage(checkpoint: Path) -> str:
        names = os.listdir(checkpoint / store)
        assert "1.delta" not in names, f"maintenance purged nothing, the snapshots are not needed: {sorted(names)}"
        snapshots = [name for name in names if name.endswith(".snapshot")]
        assert snapshots, sorted(names)
        remove(checkpoint, *[f"{store}/{name}" for name in snapshots])
        return store
    return damage


def remove_listed_sst(store: str) -> Callable[[Path], str]:
    def damage(checkpoint: Path) -> str:
        listed = rocksdb_zip_ssts((checkpoint / store / f"{VERSION}.zip").read_bytes())
        remove(checkpoint, f"{store}/SSTs/{listed[0]}")
        return f"{store}/SSTs"
    return damage


def remove_partition(operator: str, partition: int) -> Callable[[Path], str]:
    def damage(checkpoint: Path) -> str:
        shutil.rmtree(checkpoint / operator / str(partition))
        return operator
    return damage


@pytest.mark.parametrize("kind", ["hdfs", "rocksdb", "changelog", "stateless"])
def test_intact_checkpoint_passes_fsck_and_restarts(capsys, spark, built, kind, tmp_path):
    checkpoint = copy_of(built, kind, tmp_path)
    result = fsck(capsys, checkpoint)
    assert result.code == 0, result.out + result.err
    assert f"committed batch {LAST_BATCH}" in result.out
    assert restart(spark, built, kind, checkpoint, tmp_path) is None
    assert (checkpoint / "commits" / str(LAST_BATCH + 1)).exists()


@pytest.mark.parametrize(
    ("kind", "damage"),
    [
        pytest.param("hdfs", remove_newest("delta", "state/1/1"), id="hdfs-newest-delta"),
        pytest.param("hdfs", remove_snapshots("state/0/0"), id="hdfs-snapshot-the-chain-needs"),
        pytest.param("hdfs", remove_partition("state/1", 1), id="hdfs-partition-directory"),
        pytest.param("rocksdb", remove_newest("zip", "state/0/1"), id="rocksdb-newest-zip"),
        pytest.param("rocksdb", remove_listed_sst("state/0/0"), id="rocksdb-sst-the-zip-lists"),
        pytest.param("changelog", remove_newest("changelog", "state/0/0"), id="rocksdb-newest-changelog"),
    ],
)
def test_missing_state_file_fails_fsck_as_it_fails_spark(capsys, spark, built, kind, damage, tmp_path):
    checkpoint = copy_of(built, kind, tmp_path)
    where = damage(checkpoint)
    result = fsck(capsys, checkpoint)
    assert result.code == 1, result.out
    assert f"ERROR: {checkpoint}/{where}" in result.out
    assert "CANNOT_LOAD_STATE_STORE" in result.out
    error = restart(spark, built, kind, checkpoint, tmp_path)
    assert error is not None, "Spark restarted on a checkpoint fsck called unfit"
    assert "CANNOT_LOAD_STATE_STORE" in error, error[:2000]
