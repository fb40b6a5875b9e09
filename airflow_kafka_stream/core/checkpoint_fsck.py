"""Rules that check a Spark checkpoint's files, as pure functions over what was read.

Each rule is a small function named for what it detects and returns findings,
never raises: the report says everything wrong at once. The I/O side
(``checkpoint/fsck.py``) lists and reads the files and feeds these rules.

Rules:
1. Every retained log file (``offsets/N``, ``commits/N``, ``metadata``) parses.
2. A commit never runs ahead of its offsets: ``commits/N`` needs ``offsets/N``.
3. Retained batch ids are contiguous (Spark only purges from the bottom).
4. No temporary files are left over by an interrupted write.
5. Every Hadoop ``.crc`` file has its data file and a matching checksum.
6. No append or restore of ours was interrupted half-way.
7. Every stateful operator has a state store directory for each of its partitions.
8. The state version the next batch loads (N+1 after committed batch N) can be
   rebuilt in every store: a base (HDFS ``.snapshot``, RocksDB ``.zip``, or
   none) and every ``.delta``/``.changelog`` after it up to that version.
9. Every SST file that the base RocksDB ``.zip`` lists exists under ``SSTs/``.

Rules 8 and 9 follow Spark's own loaders (HDFSBackedStateStoreProvider and
RocksDB's checkpoint format version 1): the base is the newest snapshot at or
below the version; no older base is tried when a file after it is missing.
"""

from __future__ import annotations

import enum
import io
import json
import re
import struct
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_stream.core.checkpoint_log import batch_ids, is_temp_name

CRC_MAGIC = b"crc\0"


class Severity(enum.StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Finding:
    """One observation about one path; errors make the checkpoint unfit to restart from."""

    severity: Severity
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity.value.upper()}: {self.path}: {self.message}"


@dataclass(frozen=True)
class FsckReport:
    """All findings about one checkpoint; ``ok`` when none is an error."""

    url: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.severity is Severity.WARNING)

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.url, "ok": self.ok,
                "findings": [{"severity": f.severity.value, "path": f.path, "message": f.message}
                             for f in self.findings]}


def crc_problem(data: bytes, crc_file: bytes) -> str | None:
    """Why a Hadoop ChecksumFileSystem ``.crc`` does not match ``data``, or None when it does.

    Format: magic ``crc\\0``, 4-byte big-endian bytes per checksum, then one
    big-endian CRC32 per chunk of the data.
    """
    if len(crc_file) < 8 or crc_file[:4] != CRC_MAGIC:
        return "not a Hadoop checksum file (bad magic)"
    (chunk,) = struct.unpack(">i", crc_file[4:8])
    if chunk <= 0:
        return f"invalid bytes-per-checksum {chunk}"
    sums = crc_file[8:]
    expected = b"".join(struct.pack(">I", zlib.crc32(data[at : at + chunk])) for at in range(0, len(data), chunk))
    if sums != expected:
        return f"checksum does not match the file's {len(data)} bytes (file changed after it was written)"
    return None


def crc_target(name: str) -> str | None:
    """The data file a ``.name.crc`` file belongs to, or None when ``name`` is not a crc file."""
    if name.startswith(".") and name.endswith(".crc") and len(name) > 5:
        return name[1:-4]
    return None


# 1. Every retained log file parses (parse errors are collected by the caller).
def unparseable_files(errors: Mapping[str, str]) -> list[Finding]:
    return [
        Finding(Severity.ERROR, path, f"{message}; the checkpoint cannot restart from it")
        for path, message in sorted(errors.items())
    ]


# 2. A commit never runs ahead of its offsets.
def commits_without_offsets(offset_names: Iterable[str], commit_names: Iterable[str], root: str) -> list[Finding]:
    orphans = sorted(batch_ids(commit_names) - batch_ids(offset_names))
    return [
        Finding(
            Severity.ERROR,
            f"{root}/commits/{batch}",
            f"commit of batch {batch} has no offsets/{batch}: the commit log runs ahead of the offset log; "
            "restore from a savepoint",
        )
        for batch in orphans
    ]


# 3. Retained batch ids are contiguous.
def gaps(names: Iterable[str], directory: str) -> list[Finding]:
    ids = sorted(batch_ids(names))
    missing = [batch for batch in range(ids[0], ids[-1] + 1) if batch not in set(ids)] if ids else []
    if not missing:
        return []
    return [
        Finding(
            Severity.ERROR,
            directory,
            f"batch files missing inside the retained range {ids[0]}..{ids[-1]}: {missing[:10]}"
            f"{' ...' if len(missing) > 10 else ''}; restore from a savepoint",
        )
    ]


# 4. No temporary files are left over.
def leftover_temp_files(paths: Iterable[str]) -> list[Finding]:
    return [
        Finding(Severity.WARNING, path, "temporary file left by an interrupted write; safe to delete")
        for path in sorted(paths)
        if is_temp_name(path.rsplit("/", 1)[-1])
    ]


# 5. Every .crc file has its file and a matching checksum.
def crc_findings(crc_results: Mapping[str, str | None]) -> list[Finding]:
    """``crc_results``: crc path -> problem (None when it matched, "missing" when its file is gone)."""
    findings = []
    for path, problem in sorted(crc_results.items()):
        if problem == "missing":
            findings.append(
                Finding(Severity.WARNING, path, "checksum file without its data file (stale); safe to delete")
            )
        elif problem:
            findings.append(
                Finding(
                    Severity.ERROR,
                    path,
                    f"{problem}; Hadoop refuses to read the file: restore it from a savepoint, or delete the "
                    ".crc if the file's content is known to be right",
                )
            )
    return findings


# 6. No append or restore of ours was interrupted.
def interrupted_operations(root: str, has_append_journal: bool, has_restore_marker: bool) -> list[Finding]:
    findings = []
    if has_append_journal:
        findings.append(
            Finding(
                Severity.ERROR,
                f"{root}/_append_in_progress.json",
                "an offset append was interrupted; run `airflow-kafka-stream checkpoint repair` (the next reset "
                "or job start does it too) before starting the query",
            )
        )
    if has_restore_marker:
        findings.append(
            Finding(
                Severity.ERROR,
                f"{root}/_restore_in_progress.json",
                "a restore into this location was interrupted; delete the directory and restore again",
            )
        )
    return findings


# -- state stores ------------------------------------------------------------------------------------------------

#: Base files a state version can be loaded from, and the files replayed on top of a base.
BASE_KINDS = ("snapshot", "zip")
REPLAY_KINDS = ("delta", "changelog")
_STATE_NAME = re.compile(r"^([0-9]+)(_[0-9a-fA-F-]+)?\.(delta|snapshot|zip|changelog)$")


def state_version_file(name: str) -> tuple[int, str, bool] | None:
    """``(version, kind, has_unique_id)`` of a state store file name such as ``12.delta`` or ``7.zip``.

    ``has_unique_id`` marks checkpoint format version 2 names (``7_<uuid>.zip``).
    """
    match = _STATE_NAME.match(name)
    return (int(match.group(1)), match.group(3), bool(match.group(2))) if match else None


@dataclass(frozen=True)
class StateLoad:
    """How Spark loads one version of one store: from ``base`` (0: empty) replaying ``replay``."""

    version: int
    base: int
    base_name: str | None
    replay: tuple[str, ...]
    missing: tuple[int, ...]


def state_load(names: Iterable[str], version: int) -> StateLoad:
    """Which files load ``version`` from a store directory's file names, and which replay files are missing.

    Spark takes the newest base (``.snapshot``/``.zip``) at or below the version,
    or an empty store when there is none, and replays every ``.delta`` or
    ``.changelog`` after it; a missing one fails the load.
    """
    bases: dict[int, str] = {}
    replays: dict[int, str] = {}
    for name in names:
        parsed = state_version_file(name)
        if parsed is None or parsed[0] > version:
            continue
        (bases if parsed[1] in BASE_KINDS else replays)[parsed[0]] = name
    base = max(bases, default=0)
    wanted = range(base + 1, version + 1)
    return StateLoad(
        version=version,
        base=base,
        base_name=bases.get(base),
        replay=tuple(replays[v] for v in wanted if v in replays),
        missing=tuple(v for v in wanted if v not in replays),
    )


def rocksdb_zip_ssts(zip_bytes: bytes) -> list[str]:
    """The SST file names (under ``SSTs/``) that a RocksDB ``N.zip`` checkpoint lists in its ``metadata``."""
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
        lines = archive.read("metadata").decode("utf-8").split("\n")
    info = json.loads(lines[1])
    return [entry["dfsSstFileName"] for entry in info.get("sstFiles", [])]


# 7. Every stateful operator has a store directory for each partition.
def missing_partitions(operator_dir: str, partitions: Iterable[int], expected: int | None) -> list[Finding]:
    if not expected:
        return []
    missing = sorted(set(range(expected)) - set(partitions))
    if not missing:
        return []
    return [
        Finding(
            Severity.ERROR,
            operator_dir,
            f"state of partition(s) {missing[:10]} of {expected} missing: Spark cannot load the operator's "
            "state (CANNOT_LOAD_STATE_STORE); restore from a savepoint, or drop state (a reset or restore with drop_state)",
        )
    ]


# 8. The version the next batch loads can be rebuilt.
def unrebuildable_state(store_dir: str, names: Iterable[str], version: int) -> list[Finding]:
    """Findings for one store directory that must load ``version``."""
    names = list(names)
    if any((parsed := state_version_file(name)) and parsed[2] for name in names):
        return [
            Finding(
                Severity.WARNING,
                store_dir,
                "state files carry unique ids (state checkpoint format version 2): which files load version "
                f"{version} is recorded in the commit log and not checked here; restart the query to prove it",
            )
        ]
    load = state_load(names, version)
    if not load.missing:
        return []
    kinds = {parsed[1] for name in names if (parsed := state_version_file(name))}
    rocksdb = bool(kinds & {"zip", "changelog"})
    if rocksdb and "changelog" not in kinds:
        problem = (f"{version}.zip is missing and there are no changelog files (changelog checkpointing off) to "
                   "rebuild it from an older zip")
    else:
        suffix = "changelog" if rocksdb else "delta"
        files = ", ".join(f"{v}.{suffix}" for v in load.missing[:5]) + (" ..." if len(load.missing) > 5 else "")
        files += " is" if len(load.missing) == 1 else " are"
        base = load.base_name or "an empty store (no snapshot at or below it)"
        problem = f"Spark starts from {base} and replays every file after it, but {files} missing"
    return [
        Finding(
            Severity.ERROR,
            store_dir,
            f"state version {version} cannot be rebuilt: {problem}; the restart would fail with "
            "CANNOT_LOAD_STATE_STORE. Restore from a savepoint, or drop state (a reset or restore with drop_state)",
        )
    ]


# 9. Every SST file the base RocksDB zip lists exists.
def missing_ssts(store_dir: str, zip_name: str, listed: Iterable[str], present: Iterable[str]) -> list[Finding]:
    missing = sorted(set(listed) - set(present))
    if not missing:
        return []
    return [
        Finding(
            Severity.ERROR,
            f"{store_dir}/SSTs",
            f"{zip_name} lists SST file(s) that are missing: {', '.join(missing[:5])}"
            f"{' ...' if len(missing) > 5 else ''}; Spark cannot load the state (CANNOT_LOAD_STATE_STORE). "
            "Restore from a savepoint, or drop state (a reset or restore with drop_state)",
        )
    ]
