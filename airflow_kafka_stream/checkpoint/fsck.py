"""Check a checkpoint's files: every log parses, logs agree, checksums match, nothing half-written,
and every stateful operator's state can be loaded for the next batch, as Spark's loaders would.

Unlike :func:`read_position` this reads every retained log file: it is the
thorough check run before and after an operation, not the hot path.
"""

from __future__ import annotations

import json
import zipfile

import fsspec

from airflow_kafka_stream.checkpoint.atomic import join, list_names, open_fs
from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.core.checkpoint_fsck import (
    Finding,
    FsckReport,
    Severity,
    commits_without_offsets,
    crc_findings,
    crc_problem,
    crc_target,
    gaps,
    interrupted_operations,
    leftover_temp_files,
    missing_partitions,
    missing_ssts,
    rocksdb_zip_ssts,
    state_load,
    state_version_file,
    unparseable_files,
    unrebuildable_state,
)
from airflow_kafka_stream.core.checkpoint_log import (
    APPEND_JOURNAL,
    COMMITS_DIR,
    METADATA,
    OFFSETS_DIR,
    RESTORE_MARKER,
    STATE_DIR,
    batch_id_of,
    batch_ids,
    parse_commit_log,
    parse_offset_log,
    parse_query_metadata,
)
from airflow_kafka_stream.errors import StreamError


def fsck(url: str, storage_options: dict | None = None) -> FsckReport:
    """Check the checkpoint at ``url`` and return every finding (never raises for a bad checkpoint)."""
    fs, root = open_fs(url, storage_options)
    fs.invalidate_cache()
    if not fs.exists(root):
        return FsckReport(url, (Finding(Severity.ERROR, url, "checkpoint location does not exist; check the path"),))
    files = sorted(path for path in fs.find(root) if not path.endswith("/"))
    relative = [path[len(root) + 1 :] for path in files]
    names = {rel for rel in relative if "/" not in rel}
    findings: list[Finding] = []
    parse_errors: dict[str, str] = {}
    if METADATA not in names:
        parse_errors[join(root, METADATA)] = "metadata file missing (it holds the query id)"
    offset_names = list_names(fs, join(root, OFFSETS_DIR))
    commit_names = list_names(fs, join(root, COMMITS_DIR))
    for directory, dir_names, parse in (
        (OFFSETS_DIR, offset_names, parse_offset_log),
        (COMMITS_DIR, commit_names, parse_commit_log),
        ("", [METADATA] if METADATA in names else [], parse_query_metadata),
    ):
        for name in dir_names:
            if directory and batch_id_of(name) is None:
                continue
            path = join(root, directory, name) if directory else join(root, name)
            try:
                parse(fs.cat_file(path), path)
            except StreamError as exc:
                parse_errors[path] = str(exc)
    findings += unparseable_files(parse_errors)
    findings += commits_without_offsets(offset_names, commit_names, root)
    findings += gaps(offset_names, join(root, OFFSETS_DIR)) + gaps(commit_names, join(root, COMMITS_DIR))
    findings += leftover_temp_files(files)
    findings += crc_findings(_check_crcs(fs, files))
    findings += interrupted_operations(root, APPEND_JOURNAL in names, RESTORE_MARKER in names)
    committed = max(batch_ids(commit_names), default=None)
    if committed is not None:
        findings += _state_findings(fs, root, relative, committed + 1, _shuffle_partitions(fs, root, committed))
    if not any(finding.severity is Severity.ERROR for finding in findings):
        findings += _describe(url, storage_options)
    return FsckReport(url, tuple(findings))


def _state_findings(fs: fsspec.AbstractFileSystem, root: str, relative: list[str], version: int,
                    default_partitions: int | None) -> list[Finding]:
    """Rules 7-9 for every operator under ``state/``: the state that batch ``version - 1`` wrote must load."""
    by_dir: dict[str, list[str]] = {}
    for rel in relative:
        if rel.startswith(f"{STATE_DIR}/"):
            directory, _, name = rel.rpartition("/")
            by_dir.setdefault(directory, []).append(name)
    stores = sorted(d for d, names in by_dir.items() if any(state_version_file(n) for n in names))
    findings: list[Finding] = []
    operators = sorted({d.split("/")[1] for d in by_dir if d.count("/") >= 1 and d.split("/")[1].isdigit()}, key=int)
    for operator in operators:
        prefix = f"{STATE_DIR}/{operator}/"
        present = {int(d[len(prefix):].split("/")[0]) for d in stores
                   if d.startswith(prefix) and d[len(prefix):].split("/")[0].isdigit()}
        expected = _operator_partitions(fs, join(root, STATE_DIR, operator)) or default_partitions
        findings += missing_partitions(join(root, STATE_DIR, operator), present, expected)
    for store in stores:
        store_path = join(root, store)
        names = by_dir[store]
        problems = unrebuildable_state(store_path, names, version)
        findings += problems
        base_name = state_load(names, version).base_name
        if problems or not base_name or not base_name.endswith(".zip"):
            continue
        try:
            listed = rocksdb_zip_ssts(fs.cat_file(join(store_path, base_name)))
        except (KeyError, IndexError, ValueError, zipfile.BadZipFile) as exc:
            findings.append(Finding(Severity.ERROR, join(store_path, base_name),
                                    f"unreadable RocksDB checkpoint ({exc}); Spark cannot load this state: "
                                    "restore from a savepoint, or drop state (a reset or restore with drop_state)"))
            continue
        findings += missing_ssts(store_path, base_name, listed, by_dir.get(f"{store}/SSTs", []))
    return findings


def _operator_partitions(fs: fsspec.AbstractFileSystem, operator_dir: str) -> int | None:
    """numPartitions from ``state/<op>/_metadata/metadata`` (Spark 3.5+), None when unknown."""
    try:
        info = json.loads(fs.cat_file(join(operator_dir, "_metadata", "metadata")).decode("utf-8").split("\n")[1])
        return int(info["stateStoreInfo"][0]["numPartitions"])
    except (FileNotFoundError, IndexError, KeyError, ValueError, TypeError):
        return None


def _shuffle_partitions(fs: fsspec.AbstractFileSystem, root: str, batch: int) -> int | None:
    """The query's ``spark.sql.shuffle.partitions`` (the state partition count) from its offset log."""
    try:
        entry = parse_offset_log(fs.cat_file(join(root, OFFSETS_DIR, str(batch))))
        return int(entry.metadata["conf"]["spark.sql.shuffle.partitions"])
    except (FileNotFoundError, StreamError, KeyError, ValueError, TypeError):
        return None


def _check_crcs(fs: fsspec.AbstractFileSystem, files: list[str]) -> dict[str, str | None]:
    present = set(files)
    results: dict[str, str | None] = {}
    for path in files:
        directory, _, name = path.rpartition("/")
        target = crc_target(name)
        if target is None:
            continue
        data_path = f"{directory}/{target}"
        if data_path not in present:
            results[path] = "missing"
            continue
        results[path] = crc_problem(fs.cat_file(data_path), fs.cat_file(path))
    return results


def _describe(url: str, storage_options: dict | None) -> list[Finding]:
    """Informational findings: position, state store provider and stateful operators."""
    try:
        position = read_position(url, storage_options)
    except StreamError as exc:
        return [Finding(Severity.ERROR, url, str(exc))]
    info = [
        Finding(
            Severity.INFO,
            url,
            f"query {position.query_id}: committed batch {position.batch_id}, in flight "
            f"{position.in_flight_batch_id}, state store {position.state_store_provider}",
        )
    ]
    for operator in position.stateful_operators:
        info.append(
            Finding(
                Severity.INFO,
                f"{url}/state/{operator.operator_id}",
                f"stateful operator {operator.name or '?'} with {operator.num_partitions or '?'} partition(s)",
            )
        )
    return info
