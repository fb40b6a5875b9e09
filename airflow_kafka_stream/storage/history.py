"""A job's operation history: an append-only log that several writers may add to at the same time.

Most operations append under the job lock, but some may not take it (a watchdog restart, a standby ended
while another operation holds the lock), so an append must never lose another's record:

- on a local file system each record is one ``O_APPEND`` write of a line to ``history.jsonl``;
- object stores cannot append, and rewriting the file (read, add a line, put) drops a record written by
  someone else in between. Each record is its own object, ``history/<time ns>-<id>.json``, written with one
  put and never rewritten; the holder of the job lock folds them into ``history.jsonl`` once there are
  :data:`COMPACT_AFTER` of them (:func:`compact`), so reading the history costs a few requests, not one per
  operation the job ever had.

Every record carries an ``id``: a reader that meets a record twice (in the file and as an object, between a
compaction's write and its deletes) keeps it once.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Any

from fsspec import AbstractFileSystem

from airflow_kafka_stream.storage.files import is_local
from airflow_kafka_stream.storage.layout import HISTORY, HISTORY_RECORDS

HISTORY_FILE = HISTORY[0]
RECORDS_DIR = HISTORY_RECORDS[0]
#: Record objects that make the lock holder fold them into history.jsonl.
COMPACT_AFTER = 20

log = logging.getLogger(__name__)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, default=str) + "\n"


def append(fs: AbstractFileSystem, home: str, record: dict[str, Any]) -> None:
    """Add one record (an ``id`` is given to it when it has none)."""
    record.setdefault("id", uuid.uuid4().hex)
    if is_local(fs):
        fs.makedirs(home, exist_ok=True)
        with open(f"{home}/{HISTORY_FILE}", "a", encoding="utf-8") as out:
            out.write(_line(record))
            out.flush()
            os.fsync(out.fileno())
        return
    fs.pipe_file(f"{home}/{RECORDS_DIR}/{time.time_ns():020d}-{record['id']}.json", _line(record).encode())


def read(fs: AbstractFileSystem, home: str) -> list[dict[str, Any]]:
    """Every record, oldest first."""
    # The objects are listed before the file is read: a compaction in between has then put what it deletes
    # into the file already, and an object gone by the time it is read is skipped.
    objects = _record_objects(fs, home)
    records = _parse(fs.cat_file(f"{home}/{HISTORY_FILE}")) if fs.exists(f"{home}/{HISTORY_FILE}") else []
    for path in objects:
        try:
            records += _parse(fs.cat_file(path))
        except FileNotFoundError:
            continue
    return _unique(records)


def compact(fs: AbstractFileSystem, home: str) -> int:
    """Fold the record objects into ``history.jsonl`` when there are enough of them; the caller holds the job
    lock (two folds at once could each delete what only the other wrote into the file). Returns how many."""
    if is_local(fs):
        return 0
    objects = _record_objects(fs, home)
    if len(objects) < COMPACT_AFTER:
        return 0
    path = f"{home}/{HISTORY_FILE}"
    records = _parse(fs.cat_file(path)) if fs.exists(path) else []
    for item in objects:
        records += _parse(fs.cat_file(item))
    fs.pipe_file(path, "".join(_line(r) for r in _unique(records)).encode())
    fs.rm(objects)
    log.info("history of %s: folded %d record objects into %s", home, len(objects), HISTORY_FILE)
    return len(objects)


def _record_objects(fs: AbstractFileSystem, home: str) -> list[str]:
    try:
        return sorted(p for p in fs.ls(f"{home}/{RECORDS_DIR}", detail=False) if p.endswith(".json"))
    except FileNotFoundError:
        return []


def _parse(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def _unique(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    kept = []
    for record in records:
        key = record.get("id") or _line(record)  # records written before ids existed are told apart whole
        if key not in seen:
            seen.add(key)
            kept.append(record)
    return kept
