"""Read what a checkpoint's state holds from Spark's own files, over fsspec (the parsing is core.state_metadata's).

Cost per stateful operator: one recursive listing of ``state/<op>/`` (the
versions present per store) and a few small reads (its metadata and one schema
file per store). A file that is missing or unreadable becomes that operator's or
store's problem, never an error of the whole listing.
"""

from __future__ import annotations

import fsspec

from airflow_kafka_stream.checkpoint.atomic import is_dir, join, list_names, open_fs
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.checkpoint_log import STATE_DIR, batch_id_of
from airflow_kafka_stream.core.state_metadata import (
    DEFAULT_STORE,
    CheckpointState,
    OperatorMetadata,
    StateOperator,
    StateStore,
    StoreInfo,
    newest_at_or_below,
    parse_operator_metadata,
    state_file_version,
)
from airflow_kafka_stream.core.state_schema import ColumnFamily, parse_schema_file
from airflow_kafka_stream.errors import CheckpointFormatError

METADATA_DIR = "_metadata"
SCHEMA_DIR = "_stateSchema"
#: Directories under ``state/<op>/`` (and a partition) that hold no state versions.
NOT_STATE = {METADATA_DIR, SCHEMA_DIR, "SSTs"}


def read_state(url: str, storage_options: dict | None = None) -> CheckpointState:
    """The stateful operators of the checkpoint at ``url`` (CheckpointFormatError when it is no checkpoint)."""
    position = read_position(url, storage_options)
    fs, root = open_fs(url, storage_options)
    state_dir = join(root, STATE_DIR)
    if not is_dir(fs, state_dir):
        return CheckpointState(url, position.batch_id, False)
    ids = sorted(i for i in (batch_id_of(name) for name in list_names(fs, state_dir)) if i is not None)
    operators = tuple(read_operator(fs, join(state_dir, str(i)), i, position.batch_id) for i in ids)
    return CheckpointState(url, position.batch_id, True, operators)


def read_operator(fs: fsspec.AbstractFileSystem, op_dir: str, operator_id: int,
                  batch_id: int | None) -> StateOperator:
    """One operator: its metadata (v2 when present, else v1), its stores' schemas and its state versions."""
    problems: list[str] = []
    metadata = None
    try:
        metadata = _metadata(fs, op_dir, batch_id)
        if metadata is None:
            problems.append("no operator metadata (_metadata/metadata: Spark writes it since 3.5)")
    except (CheckpointFormatError, OSError) as exc:
        problems.append(str(exc))
    versions = _versions(fs, op_dir)
    infos = metadata.stores if metadata else tuple(StoreInfo(name, None) for name in sorted(versions)) or (
        StoreInfo(DEFAULT_STORE, None),)
    stores = tuple(_store(fs, op_dir, info) for info in infos)
    present = [v for found in versions.values() for v in found]
    return StateOperator(
        operator_id=operator_id,
        name=metadata.operator_name if metadata else None,
        stores=stores,
        first_version=min(present) if present else None,
        last_version=max(present) if present else None,
        metadata_version=metadata.version if metadata else None,
        problems=tuple(problems),
    )


def _metadata(fs: fsspec.AbstractFileSystem, op_dir: str, batch_id: int | None) -> OperatorMetadata | None:
    """The v2 file that applies at ``batch_id`` when there are v2 files, else the v1 file, else None."""
    v2_dir = join(op_dir, METADATA_DIR, "v2")
    batches = [b for b in (batch_id_of(n) for n in list_names(fs, v2_dir) if not n.endswith(".crc")) if b is not None]
    chosen = newest_at_or_below(batches, batch_id)
    path = join(v2_dir, str(chosen)) if chosen is not None else join(op_dir, METADATA_DIR, "metadata")
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return None
    return parse_operator_metadata(data, path.rsplit("/state/", 1)[-1])


def _versions(fs: fsspec.AbstractFileSystem, op_dir: str) -> dict[str, list[int]]:
    """State versions present per store name, from one recursive listing of the operator's directory."""
    found: dict[str, list[int]] = {}
    prefix = op_dir.rstrip("/") + "/"
    for path in fs.find(op_dir):
        parts = path[len(prefix):].split("/") if path.startswith(prefix) else []
        if len(parts) not in (2, 3) or not parts[0].isdigit() or any(p in NOT_STATE for p in parts[1:-1]):
            continue
        version = state_file_version(parts[-1])
        if version is not None:
            found.setdefault(parts[1] if len(parts) == 3 else DEFAULT_STORE, []).append(version)
    return found


def _store(fs: fsspec.AbstractFileSystem, op_dir: str, info: StoreInfo) -> StateStore:
    try:
        families = _schema(fs, op_dir, info)
    except (CheckpointFormatError, OSError) as exc:
        return StateStore(info.name, info.num_partitions, (), str(exc))
    if families is None:
        return StateStore(info.name, info.num_partitions, (), "no schema file")
    return StateStore(info.name, info.num_partitions, families)


def _schema(fs: fsspec.AbstractFileSystem, op_dir: str, info: StoreInfo) -> tuple[ColumnFamily, ...] | None:
    """The store's schema: the v3 file its metadata names (newest), else partition 0's ``_metadata/schema``."""
    if info.schema_paths:
        path = _local_schema_path(op_dir, info)
        return parse_schema_file(fs.cat_file(path), path.rsplit("/state/", 1)[-1])
    store_dir = join(op_dir, "0") if info.name == DEFAULT_STORE else join(op_dir, "0", info.name)
    path = join(store_dir, METADATA_DIR, "schema")
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return None
    return parse_schema_file(data, path.rsplit("/state/", 1)[-1])


def _local_schema_path(op_dir: str, info: StoreInfo) -> str:
    """Where the newest v3 schema file of the store is in *this* checkpoint.

    The metadata records absolute URLs (``file:/old/place/state/0/_stateSchema/default/0_<uuid>``), which
    point at the original location after a savepoint or restore copied the checkpoint: keep the part from
    ``_stateSchema/`` on.
    """
    recorded = info.schema_paths[-1]
    marker = f"/{SCHEMA_DIR}/"
    if marker in recorded:
        return join(op_dir, SCHEMA_DIR, recorded.split(marker, 1)[1])
    return join(op_dir, SCHEMA_DIR, info.name, recorded.rsplit("/", 1)[-1])
