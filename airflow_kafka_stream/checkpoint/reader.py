"""Read where a Spark checkpoint stands, cheaply, on any fsspec filesystem.

Cost: a listing of the checkpoint root and ``state/``, O(log n) existence probes
to find the newest batch (Spark's logs hold a contiguous range of batch ids),
and a few small reads; never one read per retained batch.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import fsspec

from airflow_kafka_stream.checkpoint.atomic import any_names, exists_file, is_dir, is_local, join, list_names, open_fs
from airflow_kafka_stream.core.checkpoint_log import (
    APPEND_JOURNAL,
    COMMITS_DIR,
    METADATA,
    OFFSETS_DIR,
    RESTORE_MARKER,
    STATE_DIR,
    CommitLogEntry,
    OffsetLogEntry,
    batch_id_of,
    last_contiguous,
    parse_commit_log,
    parse_offset_log,
    parse_query_metadata,
)
from airflow_kafka_stream.core.kafka_sources import KafkaSources
from airflow_kafka_stream.core.offsets import PartitionOffsets, to_nested
from airflow_kafka_stream.errors import CheckpointFormatError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatefulOperator:
    """A stateful operator's directory under ``state/`` and what its metadata says about it."""

    operator_id: int
    name: str | None = None
    num_partitions: int | None = None


@dataclass(frozen=True)
class CheckpointPosition:
    """Where a checkpoint stands: the last committed batch and everything a control operation needs."""

    url: str
    query_id: str
    batch_id: int | None
    offsets: OffsetLogEntry | None
    commit: CommitLogEntry | None
    in_flight_batch_id: int | None = None
    in_flight_offsets: OffsetLogEntry | None = None
    stateful: bool = False
    stateful_operators: tuple[StatefulOperator, ...] = ()
    incomplete_append: int | None = None

    @property
    def has_committed_batch(self) -> bool:
        return self.batch_id is not None

    @property
    def watermark_ms(self) -> int | None:
        return self.offsets.watermark_ms if self.offsets else None

    @property
    def timestamp_ms(self) -> int | None:
        return self.offsets.timestamp_ms if self.offsets else None

    @property
    def state_store_provider(self) -> str | None:
        entry = self.offsets or self.in_flight_offsets
        return entry.state_store_provider if entry else None

    @property
    def source_count(self) -> int:
        return len(self.offsets.source_lines) if self.offsets else 0

    def source_offsets(self, index: int = 0) -> PartitionOffsets:
        """Kafka offsets of source ``index`` at the committed batch (the next offsets to read)."""
        if self.offsets is None:
            raise CheckpointFormatError(
                f"{self.url}: no committed batch yet, so there are no source offsets; "
                "let the query commit its first batch"
            )
        return self.offsets.source_offsets(index)

    def kafka_sources(self) -> KafkaSources:
        """The committed batch's Kafka source lines by index (a query may union several Kafka readers)."""
        if self.offsets is None:
            raise CheckpointFormatError(
                f"{self.url}: no committed batch yet, so there are no source offsets; "
                "let the query commit its first batch"
            )
        return self.offsets.kafka_sources(self.url)

    def committed_kafka_offsets(self) -> PartitionOffsets | None:
        """Every Kafka source's offsets at the committed batch together (a query may union several Kafka
        readers), without refusing a partition two sources share; None before the first batch or with no
        Kafka source. What a running driver records as its position."""
        if self.offsets is None:
            return None
        kafka = self.kafka_sources()
        return kafka.union() if kafka.by_index else None

    def kafka_offsets(self, operation: str) -> PartitionOffsets:
        """Every Kafka source's offsets in one mapping; refuses when there is none or two share a partition."""
        return self.kafka_sources().require_one_position_per_partition(operation).union()

    def to_dict(self) -> dict[str, Any]:
        """The position as JSON: ``offsets`` is every Kafka source together (None when there is no single
        position), ``kafka_sources`` each source line's offsets by index."""
        in_flight = None
        if self.in_flight_batch_id is not None:
            flight = self.in_flight_offsets.kafka_sources() if self.in_flight_offsets else None
            in_flight = {"batch_id": self.in_flight_batch_id,
                         "offsets": to_nested(flight.union()) if flight and not flight.shared_partitions() else None,
                         "kafka_sources": _by_source(self.in_flight_offsets)}
        sources = self.offsets.kafka_sources() if self.offsets is not None else None
        return {
            "checkpoint": self.url,
            "query_id": self.query_id,
            "batch_id": self.batch_id,
            "offsets": to_nested(sources.union()) if sources and sources.by_index
            and not sources.shared_partitions() else None,
            "kafka_sources": _by_source(self.offsets),
            "sources": list(self.offsets.source_lines) if self.offsets else [],
            "batch_watermark_ms": self.watermark_ms,
            "batch_time": datetime.fromtimestamp(self.timestamp_ms / 1000, UTC).isoformat()
            if self.timestamp_ms else None,
            "in_flight": in_flight,
            "stateful": self.stateful,
            "state_store_provider": self.state_store_provider,
            "stateful_operators": [asdict(op) for op in self.stateful_operators],
            "interrupted_append": self.incomplete_append,
        }


def _by_source(entry: OffsetLogEntry | None) -> dict[str, dict[str, dict[str, int]]]:
    if entry is None:
        return {}
    return {str(index): to_nested(line) for index, line in sorted(entry.kafka_sources().by_index.items())}


def read_bytes(fs: fsspec.AbstractFileSystem, path: str) -> bytes:
    try:
        return fs.cat_file(path)
    except FileNotFoundError as exc:
        raise CheckpointFormatError(f"{path}: file missing; restore the checkpoint from a savepoint") from exc


def latest_batch(fs: fsspec.AbstractFileSystem, directory: str, hint: int | None = None) -> int | None:
    """The newest batch id in a log directory, or None when it holds none.

    Local filesystems gallop up from a known batch: ``hint`` or batch 0 when they
    exist (no purge yet), else the first batch file a directory scan yields (the
    scan stops there, so it costs one directory block, not the whole listing).
    """
    if not is_local(fs):
        ids = [batch for batch in map(batch_id_of, list_names(fs, directory)) if batch is not None]
        return max(ids) if ids else None

    def exists(batch: int) -> bool:
        return exists_file(fs, join(directory, str(batch)))

    seed = next((batch for batch in (hint, 0) if batch is not None and exists(batch)), None)
    if seed is None:
        seed = next((batch for batch in map(batch_id_of, any_names(fs, directory)) if batch is not None), None)
    return None if seed is None else last_contiguous(seed, exists)


def read_operators(fs: fsspec.AbstractFileSystem, state_dir: str) -> tuple[StatefulOperator, ...]:
    operators = []
    for name in sorted(list_names(fs, state_dir), key=lambda item: (len(item), item)):
        operator_id = batch_id_of(name)
        if operator_id is None:
            continue
        operators.append(_operator(fs, join(state_dir, name, "_metadata", "metadata"), operator_id))
    return tuple(operators)


def _operator(fs: fsspec.AbstractFileSystem, metadata_path: str, operator_id: int) -> StatefulOperator:
    """Operator name and partitions from ``state/<op>/_metadata/metadata`` (absent before Spark 3.5)."""
    try:
        lines = fs.cat_file(metadata_path).decode("utf-8").split("\n")
        info = json.loads(lines[1])
        stores = info.get("stateStoreInfo") or [{}]
        return StatefulOperator(operator_id, info["operatorInfo"].get("operatorName"), stores[0].get("numPartitions"))
    except (FileNotFoundError, IndexError, KeyError, ValueError, AttributeError):
        return StatefulOperator(operator_id)


def read_started_position(url: str, storage_options: dict | None = None) -> CheckpointPosition | None:
    """The position of a checkpoint its query has started, or None for a location the query has not
    written yet (no ``metadata``): a fresh generation before its first start. Refuses what read_position does."""
    fs, root = open_fs(url, storage_options)
    if not exists_file(fs, join(root, METADATA)):
        return None
    return read_position(url, storage_options)


def read_position(url: str, storage_options: dict | None = None) -> CheckpointPosition:
    """Read a checkpoint's position. Raises CheckpointFormatError when it is missing or malformed."""
    fs, root = open_fs(url, storage_options)
    if not is_local(fs):
        fs.invalidate_cache()
    names = set(list_names(fs, root))
    if RESTORE_MARKER in names:
        raise CheckpointFormatError(
            f"{url}: a restore into this location did not finish; delete the directory and restore again"
        )
    if METADATA not in names:
        raise CheckpointFormatError(
            f"{url}: no 'metadata' file, so this is not a Spark checkpoint (or the query never started); check the path"
        )
    query_id = parse_query_metadata(read_bytes(fs, join(root, METADATA)), join(root, METADATA))
    offsets_dir, commits_dir = join(root, OFFSETS_DIR), join(root, COMMITS_DIR)
    committed = latest_batch(fs, commits_dir)
    newest_offsets = latest_batch(fs, offsets_dir, hint=committed)
    if committed is not None and (newest_offsets is None or newest_offsets < committed):
        raise CheckpointFormatError(
            f"{url}: commits/{committed} exists without offsets/{committed}: the commit log runs ahead of the "
            "offset log; restore the checkpoint from a savepoint (run fsck for details)"
        )
    offsets = commit = None
    if committed is not None:
        offsets_path, commit_path = join(offsets_dir, str(committed)), join(commits_dir, str(committed))
        offsets = parse_offset_log(read_bytes(fs, offsets_path), offsets_path)
        commit = parse_commit_log(read_bytes(fs, commit_path), commit_path)
    in_flight = newest_offsets if newest_offsets is not None and newest_offsets != committed else None
    in_flight_offsets = None
    if in_flight is not None:
        path = join(offsets_dir, str(in_flight))
        in_flight_offsets = parse_offset_log(read_bytes(fs, path), path)
    stateful = STATE_DIR in names and is_dir(fs, join(root, STATE_DIR))
    incomplete_append = None
    if APPEND_JOURNAL in names:
        journal_path = join(root, APPEND_JOURNAL)
        try:
            incomplete_append = int(json.loads(read_bytes(fs, journal_path))["batch_id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointFormatError(
                f"{journal_path}: unreadable journal of an interrupted offset reset; inspect offsets/ and commits/ "
                "for the last batch, then delete the journal by hand"
            ) from exc
    return CheckpointPosition(
        url=url,
        query_id=query_id,
        batch_id=committed,
        offsets=offsets,
        commit=commit,
        in_flight_batch_id=in_flight,
        in_flight_offsets=in_flight_offsets,
        stateful=stateful,
        stateful_operators=read_operators(fs, join(root, STATE_DIR)) if stateful else (),
        incomplete_append=incomplete_append,
    )
