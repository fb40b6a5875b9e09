"""What a checkpoint's state holds: Spark's operator metadata parsed, the operators described, two lists compared.

Pure: bytes and names in, typed results out. The files (Spark 4.2's
``OperatorStateMetadata``):

- v1, ``state/<op>/_metadata/metadata``: a ``v1`` line, then JSON
  ``{"operatorInfo": {"operatorId", "operatorName"}, "stateStoreInfo":
  [{"storeName", "numColsPrefixKey", "numPartitions"}]}``; the schemas sit in
  ``state/<op>/0[/<store>]/_metadata/schema`` (see :mod:`core.state_schema`);
- v2, ``state/<op>/_metadata/v2/<batch>`` (transformWithState; one per batch
  that changed it): a ``v2`` line, then the same JSON whose stores also list
  ``stateSchemaFilePaths`` (4.2; the v3 schema files, newest last) and an
  ``operatorPropertiesJson`` string (its state variables, time and output mode).

State files are ``<version>.delta``/``.snapshot`` (HDFS store) or
``<version>.zip``/``.changelog`` (RocksDB; ``<version>_<id>.zip`` with checkpoint
format v2) under ``state/<op>/<partition>[/<store>]/``; batch N writes version N+1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_stream.core.state_schema import ColumnFamily, schema_text
from airflow_kafka_stream.errors import CheckpointFormatError

DEFAULT_STORE = "default"
STATE_FILE = re.compile(r"^(\d+)(?:_[^.]+)?\.(delta|snapshot|zip|changelog)$")


@dataclass(frozen=True)
class StoreInfo:
    """A state store as the operator metadata names it."""

    name: str
    num_partitions: int | None
    num_cols_prefix_key: int = 0
    schema_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class OperatorMetadata:
    """The operator metadata file's content."""

    version: int
    operator_id: int
    operator_name: str
    stores: tuple[StoreInfo, ...]
    properties: dict[str, Any] = field(default_factory=dict)


def parse_operator_metadata(data: bytes, where: str = "operator metadata") -> OperatorMetadata:
    """``state/<op>/_metadata/metadata`` (v1) or ``_metadata/v2/<batch>`` (v2); CheckpointFormatError otherwise."""
    try:
        head, _, body = data.decode("utf-8").partition("\n")
    except UnicodeDecodeError as exc:
        raise CheckpointFormatError(f"{where}: not text ({exc.reason})") from exc
    head = head.strip()
    if head not in ("v1", "v2"):
        raise CheckpointFormatError(f"{where}: unknown operator metadata version {head[:20]!r} (this tool reads "
                                    "v1 and v2)")
    try:
        info = json.loads(body)
        operator = info["operatorInfo"]
        stores = tuple(
            StoreInfo(str(s["storeName"]), _int(s.get("numPartitions")), _int(s.get("numColsPrefixKey")) or 0,
                      tuple(str(p) for p in s.get("stateSchemaFilePaths") or ([s["stateSchemaFilePath"]]
                                                                              if s.get("stateSchemaFilePath") else [])))
            for s in info.get("stateStoreInfo") or ())
        properties = info.get("operatorPropertiesJson")
        properties = json.loads(properties) if isinstance(properties, str) and properties else {}
        return OperatorMetadata(int(head[1:]), int(operator["operatorId"]), str(operator["operatorName"]), stores,
                                properties if isinstance(properties, dict) else {})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointFormatError(f"{where}: unreadable {head} operator metadata ({type(exc).__name__}: "
                                    f"{exc})") from exc


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, str)) and str(value).lstrip("-").isdigit() else None


def state_file_version(name: str) -> int | None:
    """The state version a state file holds (``9.delta``, ``9.zip``, ``9_<id>.changelog``), else None."""
    found = STATE_FILE.match(name)
    return int(found.group(1)) if found else None


def newest_at_or_below(batches: Iterable[int], limit: int | None) -> int | None:
    """The v2 metadata file that applies at batch ``limit``: the newest at or below it (any, without a limit)."""
    usable = [b for b in batches if limit is None or b <= limit]
    return max(usable) if usable else None


@dataclass(frozen=True)
class StateStore:
    """One state store of an operator: partitions, schemas (one family, or a transformWithState's variables)."""

    name: str
    partitions: int | None
    families: tuple[ColumnFamily, ...] = ()
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "partitions": self.partitions, "problem": self.problem,
                "column_families": [f.to_dict() for f in self.families]}


@dataclass(frozen=True)
class StateOperator:
    """A stateful operator of a checkpoint: id, name, stores and the state versions its files hold."""

    operator_id: int
    name: str | None
    stores: tuple[StateStore, ...] = ()
    first_version: int | None = None
    last_version: int | None = None
    metadata_version: int | None = None
    problems: tuple[str, ...] = ()

    @property
    def batch_range(self) -> tuple[int, int] | None:
        """The batches whose state the files hold (version N is written by batch N-1)."""
        if self.first_version is None or self.last_version is None:
            return None
        return self.first_version - 1, self.last_version - 1

    def to_dict(self) -> dict[str, Any]:
        return {"operator_id": self.operator_id, "name": self.name, "metadata_version": self.metadata_version,
                "first_version": self.first_version, "last_version": self.last_version,
                "batch_range": list(self.batch_range) if self.batch_range else None,
                "stores": [s.to_dict() for s in self.stores], "problems": list(self.problems)}


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint's ``state/`` holds; no operator and ``stateful`` false when there is none."""

    checkpoint: str
    batch_id: int | None
    stateful: bool
    operators: tuple[StateOperator, ...] = ()
    note: str | None = None

    @property
    def problems(self) -> list[str]:
        return [f"operator {op.operator_id}: {p}" for op in self.operators for p in op.problems] + [
            f"operator {op.operator_id} (store {s.name}): {s.problem}" for op in self.operators for s in op.stores
            if s.problem]

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "batch_id": self.batch_id, "stateful": self.stateful,
                "operators": [op.to_dict() for op in self.operators], "problems": self.problems, "note": self.note}


def _count(n: int, one: str) -> str:
    return f"{n} {one}" + ("" if n == 1 else "s")


def state_differences(in_state: Sequence[StateOperator], in_new_version: Sequence[StateOperator]) -> list[str]:
    """What keeps a new version's stateful operators from loading a checkpoint's state, in words a user acts on.

    ``in_state`` is the checkpoint's list (``checkpoint state``), ``in_new_version`` the same list for the new
    version's query (e.g. read from a scratch checkpoint it ran on). Empty when nothing differs that Spark
    checks: operator count, ids and names, store names, partitions, and the key and value schemas of each
    store (or of each state variable both sides have: a transformWithState variable added or dropped is not
    reported, Spark accepts it). Schemas are compared by column types in order, as Spark does (a renamed column
    of the same type loads); a schema that could not be read on either side is not compared.
    """
    found: list[str] = []
    if len(in_state) != len(in_new_version):
        found.append(f"the new version has {_count(len(in_new_version), 'stateful operator')}, the checkpoint "
                     f"{len(in_state)}")
    old_by_id = {op.operator_id: op for op in in_state}
    for new in in_new_version:
        old = old_by_id.get(new.operator_id)
        if old is None:
            found.append(f"operator {new.operator_id} ({new.name or 'unnamed'}) is new: the state has no such "
                         "operator")
            continue
        if old.name and new.name and old.name != new.name:
            found.append(f"operator {new.operator_id}: {new.name} in the new version, {old.name} in the state")
            continue
        found += _store_differences(new.operator_id, old.stores, new.stores)
    new_ids = {op.operator_id for op in in_new_version}
    found += [f"operator {op.operator_id} ({op.name or 'unnamed'}) is in the state but not in the new version"
              for op in in_state if op.operator_id not in new_ids]
    return found


def _store_differences(operator_id: int, old: Sequence[StateStore], new: Sequence[StateStore]) -> list[str]:
    found: list[str] = []
    old_names, new_names = [s.name for s in old], [s.name for s in new]
    if old and new and sorted(old_names) != sorted(new_names):
        return [f"operator {operator_id}: stores ({', '.join(new_names)}) in the new version, "
                f"({', '.join(old_names)}) in the state"]
    old_by_name = {s.name: s for s in old}
    for store in new:
        before = old_by_name.get(store.name)
        if before is None:
            continue
        where = f"operator {operator_id} (store {store.name}"
        if store.partitions and before.partitions and store.partitions != before.partitions:
            found.append(f"{where}): {store.partitions} partitions in the new version, {before.partitions} in the "
                         "state")
        found += _family_differences(where, before.families, store.families)
    return found


def _family_differences(where: str, old: Sequence[ColumnFamily], new: Sequence[ColumnFamily]) -> list[str]:
    if not old or not new:
        return []
    found: list[str] = []
    old_by_name = {f.name: f for f in old}
    single = len(old) == 1 and len(new) == 1
    for family in new:
        before = old[0] if single else old_by_name.get(family.name)
        label = f"{where})" if single else f"{where}, state variable {family.name})"
        if before is None:  # a new state variable starts empty: Spark accepts it
            continue
        for part, now, then in (("key", family.key, before.key), ("value", family.value, before.value)):
            if [kind for _, kind in now] != [kind for _, kind in then]:
                found.append(f"{label}: {part} schema {schema_text(now)} in the new version, {schema_text(then)} "
                             "in the state")
    return found
