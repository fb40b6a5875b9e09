"""The files the source shares with the driver runtime through the job home.

The graceful-stop handshake: while ``<drainPath>/stop`` exists the source plans no new batch and
answers with ``<drainPath>/drained.json`` (the offsets it stopped at). And ``startOffsetsPath``,
where a fresh start records the offsets it resolved, since a Python source's checkpoint keeps no
record of where the query first began. Paths are any fsspec URL; this runs in the Python process
Spark starts on the driver, never on executors.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime

from airflow_kafka_stream.storage.files import storage_options_from_env, url_to_fs, write_atomic

log = logging.getLogger(__name__)

#: The two names of the stop handshake inside ``drainPath``. Spelled here, not taken from ``storage.layout``
#: (where they are ``STOP_REQUEST`` and ``DRAINED`` under ``control/``), on purpose: they are part of the
#: source's own option contract (``drainPath`` is any directory, a job home's ``control/`` or not), and the
#: source ships to Spark's Python workers, so it depends on no job-home code beyond the file helpers. A unit
#: test (tests/unit/storage/test_job_home_layout.py) keeps the two spellings equal.
STOP_FILE = "stop"
DRAINED_FILE = "drained.json"
#: Offsets ``failOnDataLoss=false`` skipped, one ``skipped-<time>-<id>.json`` each inside ``drainPath``: the driver
#: runtime moves them into the job's history and counts them.
SKIPPED_PREFIX = "skipped-"


def stop_requested(drain_path: str | None) -> bool:
    """Whether a stop request stands (``<drainPath>/stop`` exists); never without a drainPath."""
    if not drain_path:
        return False
    fs, root = _filesystem(drain_path)
    return fs.exists(f"{root}/{STOP_FILE}")


def write_drained(drain_path: str | None, start: dict) -> None:
    """Answer a stop request: the source planned nothing past ``start``."""
    body = json.dumps({"offsets": start, "at": _now()}).encode()
    _write_atomically(f"{(drain_path or '').rstrip('/')}/{DRAINED_FILE}", body)
    log.info("kafka_stream: stop requested, drained at %s", json.dumps(start))


def record_skipped(drain_path: str | None, partition: str, first: int, resume_at: int, reason: str) -> None:
    """Tell the driver runtime that ``failOnDataLoss=false`` skipped ``partition`` from ``first`` to ``resume_at``.

    Without a drainPath (a query not run by the job runtime) the warning already logged is all there is. Never
    fails the read: the skip happened either way, only its record would be missing.
    """
    if not drain_path:
        return
    body = json.dumps({"partition": partition, "first": first, "resume_at": resume_at, "reason": reason,
                       "at": _now()}).encode()
    name = f"{SKIPPED_PREFIX}{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}.json"
    try:
        _write_atomically(f"{drain_path.rstrip('/')}/{name}", body)
    except Exception as exc:  # noqa: BLE001 - see the docstring; said at warning, with the partition
        log.warning("kafka_stream: could not record the offsets skipped on %s for the job's history: %s", partition, exc)


def write_start_offsets(path: str, offsets: dict, starting: str) -> None:
    """Record where a fresh start began: the resolved offsets and the start option's kind."""
    record = {"offsets": offsets, "starting": starting, "at": _now()}
    _write_atomically(path, json.dumps(record).encode())


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _write_atomically(url: str, body: bytes) -> None:
    """Readers see the old file or the whole new one (see storage.files.write_atomic)."""
    fs, path = url_to_fs(url, storage_options_from_env())
    write_atomic(fs, path, body)


_FILESYSTEMS: dict[str, tuple] = {}


def _filesystem(url: str):
    """fsspec filesystem and root path of a URL, cached per URL (the check runs every trigger).

    Opened with the job home's storage options when the driver got them from a submit: this runs in the
    Python process Spark starts on the driver, which inherits the driver's environment.
    """
    if url not in _FILESYSTEMS:
        _FILESYSTEMS[url] = url_to_fs(url, storage_options_from_env())
    return _FILESYSTEMS[url]
