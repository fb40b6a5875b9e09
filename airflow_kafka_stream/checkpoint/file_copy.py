"""Copying and hashing checkpoint files in bounded chunks, one read per file.

A RocksDB or HDFS state file can be gigabytes. Reading it whole to hash or copy
it would take that much memory in the control plane (an Airflow worker), and
reading it once to check and again to copy would hold the job lock twice as
long. Here a file is read once, in chunks of at most :data:`CHUNK_BYTES`, and the
same chunks are hashed and written.

A copy made while the job runs (a live savepoint, a rehearsal's scratch copy) is paced (:class:`Pace`): it rests
between chunks so that it works only part of the time, leaving the job's batches most of the host's CPU and disk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import fsspec

from airflow_kafka_stream.core.savepoint_manifest import sha256
from airflow_kafka_stream.storage.files import is_local, local_atomic_file

#: The most any read holds in memory: large enough that per-call overhead (an object-store
#: request, a syscall) is negligible, small enough for any control plane.
CHUNK_BYTES = 4 * 1024 * 1024


class Pace:
    """Keeps a copy busy for at most ``share`` of the time it takes: each :meth:`rest` sleeps in proportion to the
    work done since the last one (``share`` 0.5: as long as that work took). ``share`` 1.0 never rests."""

    def __init__(self, share: float = 1.0) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"a copy's share of the time must be in (0, 1], got {share!r}")
        self.share = share
        self.rested = 0.0
        self._mark = time.monotonic()

    def start(self) -> None:
        """Work starts now (time before it, e.g. between files, is not counted)."""
        self._mark = time.monotonic()

    def rest(self) -> None:
        """Sleep for the rest owed for the work since :meth:`start` or the last rest."""
        if self.share < 1.0:
            pause = (time.monotonic() - self._mark) * (1.0 - self.share) / self.share
            time.sleep(pause)
            self.rested += pause
        self._mark = time.monotonic()


#: A copy that never rests (the job is stopped, or nothing shares the host).
UNPACED = Pace()


def _chunks(source: BinaryIO) -> Iterator[bytes]:
    while chunk := source.read(CHUNK_BYTES):
        yield chunk


def _written(chunks: Iterable[bytes], target: BinaryIO, pace: Pace = UNPACED) -> Iterator[bytes]:
    """Pass chunks through, writing each to ``target`` on its way; rest after each once it is hashed."""
    for chunk in chunks:
        target.write(chunk)
        yield chunk
        pace.rest()


def hash_file(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """sha256 of a file, read in bounded chunks. FileNotFoundError when it is missing."""
    with fs.open(path, "rb") as source:
        return sha256(_chunks(source))


def copy_file(
    source_fs: fsspec.AbstractFileSystem, source: str, target_fs: fsspec.AbstractFileSystem, target: str,
    pace: Pace = UNPACED,
) -> str:
    """Copy ``source`` to ``target`` in one pass and return the sha256 of the bytes copied.

    Readers of ``target`` see no file (or the old one) or the whole new one, as with
    storage.files.write_atomic: locally a temporary name, fsync and rename; on object
    stores one upload that becomes visible only when it completes, and is aborted on failure.
    FileNotFoundError when ``source`` is missing. ``pace`` rests after each chunk and after the file is done
    (counting the work since its last rest: what the caller did between files is paced too).
    """
    with source_fs.open(source, "rb") as reader:
        if is_local(target_fs):
            digest = _copy_local(reader, target, pace)
        else:
            digest = _copy_remote(reader, target_fs, target, pace)
    pace.rest()  # for the fsync and rename, or the upload's completion
    return digest


def _copy_local(reader: BinaryIO, target: str, pace: Pace = UNPACED) -> str:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with local_atomic_file(target) as out:
        return sha256(_written(_chunks(reader), out, pace))


def _copy_remote(reader: BinaryIO, target_fs: fsspec.AbstractFileSystem, target: str,
                 pace: Pace = UNPACED) -> str:
    out = target_fs.open(target, "wb")
    try:
        digest = sha256(_written(_chunks(reader), out, pace))
    except BaseException:
        # Closing would commit the part written so far; abort the upload instead.
        discard = getattr(out, "discard", None)
        if discard is not None:
            discard()
        try:
            out.closed = True  # fsspec's buffered files: a later close (or __del__) must not commit
        except AttributeError:
            pass
        raise
    out.close()
    return digest
