"""The savepoint manifest (what a savepoint holds and how to check it) and which state files it needs.

A savepoint directory holds copies of checkpoint files plus ``manifest.json``,
written last: a directory without a manifest is an incomplete savepoint. ``live``
says the savepoint was copied from the running job (see core/live_copy.py) rather
than after a stop; either restores the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.checkpoint_log import state_file_version
from airflow_kafka_stream.core.kafka_sources import KafkaSources
from airflow_kafka_stream.core.offsets import PartitionOffsets, parse_offsets_json
from airflow_kafka_stream.errors import CheckpointFormatError, SavepointError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Manifest:
    """Everything a savepoint says about itself; ``files`` maps relative path to sha256."""

    savepoint_id: str
    query_id: str
    batch_id: int
    source_lines: tuple[str | None, ...]
    state_store_provider: str | None
    stateful: bool
    app_version: str
    created_at: datetime
    spark_version: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    #: Taken while the job ran (a live savepoint), not after a stop. Manifests written before this field
    #: existed read as False; readers that do not know it ignore it, so the format version stays 1.
    live: bool = False

    def source_offsets(self, index: int = 0) -> PartitionOffsets:
        """Kafka offsets of source ``index`` (the next offsets to read after the savepoint's batch)."""
        if not 0 <= index < len(self.source_lines) or self.source_lines[index] is None:
            kafka = self.kafka_sources().indexes
            raise SavepointError(
                f"savepoint {self.savepoint_id} has no offsets for source {index} "
                f"({len(self.source_lines)} source(s); "
                + (f"Kafka sources: {', '.join(map(str, kafka))})" if kafka else "none of them is a Kafka source)")
            )
        try:
            return parse_offsets_json(self.source_lines[index])  # type: ignore[arg-type]
        except CheckpointFormatError as exc:
            raise SavepointError(f"savepoint {self.savepoint_id}: source {index} is not a Kafka source: {exc}") from exc

    def kafka_sources(self) -> KafkaSources:
        """The Kafka-shaped source lines by index (a query may union several Kafka readers)."""
        return KafkaSources.of_lines(self.source_lines, f"savepoint {self.savepoint_id}")


def sha256(data: bytes | Iterable[bytes]) -> str:
    """Hex sha256 of some bytes, or of chunks taken in turn (a file streamed in bounded pieces)."""
    digest = hashlib.sha256()
    for chunk in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
        digest.update(chunk)
    return digest.hexdigest()


def render_manifest(manifest: Manifest) -> str:
    data: dict[str, Any] = {
        "format_version": manifest.format_version,
        "savepoint_id": manifest.savepoint_id,
        "query_id": manifest.query_id,
        "batch_id": manifest.batch_id,
        "source_offsets": [None if line is None else json.loads(line) for line in manifest.source_lines],
        "source_lines": list(manifest.source_lines),
        "spark_version": manifest.spark_version,
        "state_store_provider": manifest.state_store_provider,
        "stateful": manifest.stateful,
        "app_version": manifest.app_version,
        "created_at": manifest.created_at.isoformat(),
        "live": manifest.live,
        "files": dict(sorted(manifest.files.items())),
    }
    return json.dumps(data, indent=2)


def parse_manifest(text: str | bytes, where: str = MANIFEST) -> Manifest:
    try:
        data = json.loads(text)
        if data.get("format_version") != FORMAT_VERSION:
            raise SavepointError(
                f"{where}: manifest format {data.get('format_version')!r} is not supported (expected "
                f"{FORMAT_VERSION}); use the airflow_kafka_stream version that wrote it"
            )
        created_at = datetime.fromisoformat(data["created_at"])
        return Manifest(
            savepoint_id=str(data["savepoint_id"]),
            query_id=str(data["query_id"]),
            batch_id=int(data["batch_id"]),
            source_lines=tuple(data["source_lines"]),
            state_store_provider=data.get("state_store_provider"),
            stateful=bool(data["stateful"]),
            app_version=str(data["app_version"]),
            created_at=created_at,
            spark_version=data.get("spark_version"),
            files=dict(data["files"]),
            live=data.get("live") is True,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SavepointError(f"{where}: manifest is unreadable ({exc}); the savepoint cannot be used") from exc


def hdfs_state_files(names: Iterable[str], version: int, where: str) -> list[str]:
    """The HDFS state store files needed to load ``version`` in one store directory.

    The newest snapshot at or below ``version`` plus every delta after it (from
    version 1 when there is no snapshot). Raises SavepointError if one is missing.
    """
    deltas: set[int] = set()
    snapshots: set[int] = set()
    for name in names:
        parsed = state_file_version(name)
        if parsed:
            (deltas if parsed[1] == "delta" else snapshots).add(parsed[0])
    base = max((snapshot for snapshot in snapshots if snapshot <= version), default=0)
    needed = [f"{base}.snapshot"] if base else []
    missing = []
    for delta in range(base + 1, version + 1):
        if delta in deltas:
            needed.append(f"{delta}.delta")
        else:
            missing.append(delta)
    if missing:
        raise SavepointError(
            f"{where}: state version {version} cannot be rebuilt, delta file(s) {missing[:5]} missing "
            f"after snapshot {base or 'none'}; the checkpoint's state is damaged (fsck it)"
        )
    return needed
