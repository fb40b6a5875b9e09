"""Parse and render the files of Spark's streaming checkpoint log, and find its position.

A checkpoint holds ``metadata`` (``{"id": "<query id>"}``), ``offsets/N`` and
``commits/N`` (``v1`` and ``{"nextBatchWatermarkMs": ...}``). An ``offsets/N``
file is ``v1``, a metadata JSON line, then one line per source in source order
(offsets JSON, or ``-`` for none); or, written by Spark 4.2+ with
``spark.sql.streaming.offsetLog.formatVersion=2``, ``v2``, the metadata line,
then one ``<source id>:<offsets JSON or ->`` line per source, in no set order.
Each version is read, and written back, as it was found: never converted. The position is
the largest N having both ``offsets/N`` and ``commits/N``; an ``offsets/N+1``
without commit is a batch in flight that Spark re-runs on restart.

Source lines are kept as raw text so that a rewrite changes only the source it
means to change; Kafka-shaped lines are parsed with :func:`parse_offsets_json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_kafka_stream.core.kafka_sources import KafkaSources, kafka_source_lines
from airflow_kafka_stream.core.offsets import PartitionOffsets, parse_offsets_json, render_offsets_json
from airflow_kafka_stream.errors import CheckpointFormatError

NO_OFFSETS = "-"
STATE_STORE_PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

_VERSION_LINE = re.compile(r"^v([1-9][0-9]*)$")
#: The offset-log versions these tools read and write (Spark's OffsetSeqLog VERSION_1 and VERSION_2).
OFFSET_LOG_VERSIONS = (1, 2)


@dataclass(frozen=True)
class OffsetLogEntry:
    """One ``offsets/N`` file: log version, metadata line (kept verbatim) and raw source lines by source index.

    ``line_order`` (version 2 only) is the order of the sources' lines in the file, so that a rewrite keeps it.
    """

    version: int
    metadata_line: str
    metadata: dict[str, Any]
    source_lines: tuple[str | None, ...]
    line_order: tuple[int, ...] | None = None

    @property
    def watermark_ms(self) -> int | None:
        return self.metadata.get("batchWatermarkMs")

    @property
    def timestamp_ms(self) -> int | None:
        return self.metadata.get("batchTimestampMs")

    @property
    def conf(self) -> dict[str, str]:
        return dict(self.metadata.get("conf") or {})

    @property
    def state_store_provider(self) -> str | None:
        return self.conf.get(STATE_STORE_PROVIDER_CONF)

    def source_value(self, index: int) -> Any:
        """The JSON value of source ``index`` (None when the source recorded ``-``)."""
        line = self._line(index)
        return None if line is None else json.loads(line)

    def source_offsets(self, index: int = 0) -> PartitionOffsets:
        """Source ``index`` as Kafka offsets; CheckpointFormatError if it is not Kafka-shaped."""
        line = self._line(index)
        kafka = sorted(kafka_source_lines(self.source_lines))
        which = (f"the Kafka source(s) of this checkpoint: {', '.join(map(str, kafka))}" if kafka
                 else "this checkpoint has no Kafka source")
        if line is None:
            raise CheckpointFormatError(f"source {index} recorded no offsets ('-'), so it is not a Kafka source; {which}")
        try:
            return parse_offsets_json(line)
        except CheckpointFormatError as exc:
            raise CheckpointFormatError(f"source {index} does not hold Kafka offsets ({exc}); {which}") from exc

    def kafka_sources(self, where: str = "the checkpoint") -> KafkaSources:
        """The Kafka-shaped source lines, by index (see core/kafka_sources.py)."""
        return KafkaSources.of_lines(self.source_lines, where)

    def with_sources_offsets(self, offsets: Mapping[int, PartitionOffsets]) -> OffsetLogEntry:
        """A copy with new Kafka offsets for several sources at once; the other lines stay as they were."""
        entry = self
        for index, source_offsets in sorted(offsets.items()):
            entry = entry.with_source_offsets(index, source_offsets)
        return entry

    def with_source_line(self, index: int, line: str) -> OffsetLogEntry:
        """A copy whose source ``index`` line is replaced; every other line stays as it was."""
        self._line(index)
        lines = list(self.source_lines)
        lines[index] = line
        return replace(self, source_lines=tuple(lines))

    def with_source_offsets(self, index: int, offsets: PartitionOffsets) -> OffsetLogEntry:
        """A copy with Kafka offsets for source ``index`` in the compact sorted form."""
        return self.with_source_line(index, render_offsets_json(offsets))

    def _line(self, index: int) -> str | None:
        if not 0 <= index < len(self.source_lines):
            raise CheckpointFormatError(
                f"source index {index} does not exist: this checkpoint has {len(self.source_lines)} source(s)"
                f" (indexes 0..{len(self.source_lines) - 1})"
            )
        return self.source_lines[index]


@dataclass(frozen=True)
class CommitLogEntry:
    """One ``commits/N`` file: log version and its metadata (kept verbatim)."""

    version: int
    metadata_line: str
    metadata: dict[str, Any]

    @property
    def next_batch_watermark_ms(self) -> int | None:
        return self.metadata.get("nextBatchWatermarkMs")


def _version(line: str, where: str) -> int:
    match = _VERSION_LINE.match(line.strip())
    if not match:
        raise CheckpointFormatError(
            f"{where}: first line must be a log version like 'v1', got {line[:40]!r}; "
            "the file is not a Spark checkpoint log file (restore it from a savepoint or start a new checkpoint)"
        )
    return int(match.group(1))


def _json_object(line: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CheckpointFormatError(
            f"{where}: metadata line is not valid JSON ({exc.msg}); restore the file from a savepoint"
        ) from exc
    if not isinstance(value, dict):
        raise CheckpointFormatError(f"{where}: metadata line must be a JSON object, got {line[:80]!r}")
    return value


def _lines(text: str | bytes, where: str) -> list[str]:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CheckpointFormatError(f"{where}: not UTF-8 text; restore the file from a savepoint") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CheckpointFormatError(f"{where}: file is empty (an interrupted write?); restore it from a savepoint")
    return lines


def parse_offset_log(text: str | bytes, where: str = "offsets file") -> OffsetLogEntry:
    """Parse an ``offsets/N`` file of either version. ``where`` names the file in error messages."""
    lines = _lines(text, where)
    version = _version(lines[0], where)
    if version not in OFFSET_LOG_VERSIONS:
        raise CheckpointFormatError(
            f"{where}: offset log version v{version} is newer than these tools read (v1, v2); nothing was read or "
            "changed: use a release of airflow-kafka-stream that knows it, or the Spark version that wrote it")
    if len(lines) < 2:
        raise CheckpointFormatError(f"{where}: metadata line missing (truncated file?); restore it from a savepoint")
    metadata = _json_object(lines[1], where)
    if version == 2:
        return _parse_keyed_sources(version, lines[1], metadata, lines[2:], where)
    sources = [_source_value(line, str(number), where) for number, line in enumerate(lines[2:])]
    return OffsetLogEntry(version, lines[1], metadata, tuple(sources))


def _source_value(line: str, source: str, where: str) -> str | None:
    """One source's raw offsets (None for ``-``), checked to be JSON."""
    if line.strip() == NO_OFFSETS:
        return None
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        raise CheckpointFormatError(
            f"{where}: offsets of source {source} are not valid JSON ({exc.msg}): {line[:120]!r}; "
            "restore the file from a savepoint"
        ) from exc
    return line


def _parse_keyed_sources(version: int, metadata_line: str, metadata: dict[str, Any], lines: list[str],
                         where: str) -> OffsetLogEntry:
    """Version 2's ``<source id>:<offsets>`` lines. Spark names a query's sources by their ordinal; ids of any
    other form (named sources) are refused, since every tool here addresses a source by its index."""
    found: dict[int, str | None] = {}
    order: list[int] = []
    for line in lines:
        key, colon, value = line.partition(":")
        if not colon or not key.isascii() or not key.isdigit():
            raise CheckpointFormatError(
                f"{where}: a v2 offsets line must be '<source ordinal>:<offsets>', got {line[:80]!r}; sources "
                "named other than by ordinal are not supported by these tools (nothing was changed)")
        index = int(key)
        if index in found:
            raise CheckpointFormatError(f"{where}: source {index} appears twice; restore the file from a savepoint")
        found[index] = _source_value(value, key, where)
        order.append(index)
    if sorted(found) != list(range(len(found))):
        raise CheckpointFormatError(
            f"{where}: v2 source ordinals {sorted(found)} are not 0..{len(found) - 1}; restore the file from a "
            "savepoint")
    return OffsetLogEntry(version, metadata_line, metadata, tuple(found[i] for i in range(len(found))),
                          tuple(order))


def render_offset_log(entry: OffsetLogEntry) -> str:
    """Render an ``offsets/N`` file the way Spark writes it, in its own version (no trailing newline)."""
    values = [NO_OFFSETS if line is None else line for line in entry.source_lines]
    if entry.version == 2:
        order = entry.line_order or tuple(range(len(values)))
        sources = [f"{index}:{values[index]}" for index in order]
    else:
        sources = values
    return "\n".join([f"v{entry.version}", entry.metadata_line, *sources])


def parse_commit_log(text: str | bytes, where: str = "commits file") -> CommitLogEntry:
    """Parse a ``commits/N`` file."""
    lines = _lines(text, where)
    version = _version(lines[0], where)
    if len(lines) < 2:
        raise CheckpointFormatError(f"{where}: metadata line missing (truncated file?); restore it from a savepoint")
    return CommitLogEntry(version, lines[1], _json_object(lines[1], where))


def render_commit_log(entry: CommitLogEntry) -> str:
    """Render a ``commits/N`` file the way Spark writes it."""
    return f"v{entry.version}\n{entry.metadata_line}"


def parse_query_metadata(text: str | bytes, where: str = "metadata") -> str:
    """The query id held by a checkpoint's ``metadata`` file."""
    lines = _lines(text, where)
    data = _json_object(lines[0], where)
    query_id = data.get("id")
    if not isinstance(query_id, str) or not query_id:
        raise CheckpointFormatError(f'{where}: expected {{"id": "<query id>"}}, got {lines[0][:80]!r}')
    return query_id


def render_query_metadata(query_id: str) -> str:
    return json.dumps({"id": query_id}, separators=(",", ":"))


def batch_id_of(name: str) -> int | None:
    """The batch id a log file name stands for, or None for ``.crc``, temp and other files."""
    return int(name) if name.isascii() and name.isdigit() else None


def batch_ids(names: Iterable[str]) -> set[int]:
    """Batch ids among file names (base names or paths), ignoring everything that is not a batch file."""
    ids = (batch_id_of(name.rstrip("/").rsplit("/", 1)[-1]) for name in names)
    return {batch for batch in ids if batch is not None}


@dataclass(frozen=True)
class LogPosition:
    """Where a checkpoint log stands: the last committed batch and a batch in flight, if any."""

    committed: int | None
    in_flight: int | None


def choose_position(offset_names: Iterable[str], commit_names: Iterable[str]) -> LogPosition:
    """The largest batch having both offsets and commit, and the newest offsets after it (in flight)."""
    offsets = batch_ids(offset_names)
    commits = batch_ids(commit_names)
    both = offsets & commits
    committed = max(both) if both else None
    newer = [batch for batch in offsets if committed is None or batch > committed]
    return LogPosition(committed, max(newer) if newer else None)


def last_contiguous(seed: int, exists: Callable[[int], bool]) -> int:
    """The largest id >= ``seed`` such that every id from ``seed`` to it exists; ``seed`` must exist.

    Spark's logs hold a contiguous range of batch ids (old ones are purged from
    the bottom), so galloping up from any existing id finds the newest one with
    O(log n) probes instead of listing every retained batch.
    """
    low, step = seed, 1
    while exists(low + step):
        low += step
        step *= 2
    high = low + step  # known missing
    while high - low > 1:
        middle = (low + high) // 2
        if exists(middle):
            low = middle
        else:
            high = middle
    return low


# Names inside a checkpoint directory.
METADATA = "metadata"
OFFSETS_DIR = "offsets"
COMMITS_DIR = "commits"
SOURCES_DIR = "sources"
STATE_DIR = "state"
#: Journal of an offset append in progress (see checkpoint/writer.py); Spark ignores it.
APPEND_JOURNAL = "_append_in_progress.json"
#: Marker of a restore in progress (see checkpoint/savepoints.py); Spark ignores it.
RESTORE_MARKER = "_restore_in_progress.json"

_STATE_FILE = re.compile(r"^([0-9]+)\.(delta|snapshot)$")


def state_file_version(name: str) -> tuple[int, str] | None:
    """``(version, kind)`` of an HDFS state store file name like ``12.delta``; None for other names."""
    match = _STATE_FILE.match(name)
    return (int(match.group(1)), match.group(2)) if match else None


def is_temp_name(name: str) -> bool:
    """Temporary files left by an interrupted write (Hadoop/Spark's ``.name.<uuid>.tmp``, ours alike)."""
    base = name[:-4] if name.endswith(".crc") else name
    return base.endswith(".tmp") or base.startswith("_temporary")


def is_compaction_batch(batch_id: int, compact_interval: int) -> bool:
    """Whether the file sink writes ``<batch>.compact`` for this batch (Spark's CompactibleFileStreamLog rule)."""
    return (batch_id + 1) % compact_interval == 0


def compact_sink_entries(logs: Iterable[str | bytes]) -> str:
    """One compacted file-sink log (``v1`` then every entry line) from the previous compact file and deltas."""
    lines = ["v1"]
    for text in logs:
        body = text.decode("utf-8") if isinstance(text, bytes) else text
        lines.extend(line for line in body.split("\n")[1:] if line.strip())
    return "\n".join(lines)
