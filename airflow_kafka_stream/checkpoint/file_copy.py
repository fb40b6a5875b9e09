"""Copying and hashing checkpoint files in bounded chunks, one read per file.

A RocksDB or HDFS state file can be gigabytes. Reading it whole to hash or copy
it would take that much memory in the control plane (an Airflow worker), and
reading it once to check and again to copy would hold the job lock twice as
long. Here a file is read once, in chunks of at most :data:`CHUNK_BYTES`, and the
same chunks are hashed and written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import fsspec

from airflow_kafka_stream.core.savepoint_manifest import sha256
from airflow_kafka_stream.storage.files import is_local, local_atomic_file

#: The most any read holds in memory: large enough that per-call overhead (an object-store
#: request, a syscall) is negligible, small enough for any control plane.
CHUNK_BYTES = 4 * 1024 * 1024


def _chunks(source: BinaryIO) -> Iterator[bytes]:
    while chunk := source.read(CHUNK_BYTES):
        yield chunk


def _written(chunks: Iterable[bytes], target: BinaryIO) -> Iterator[bytes]:
    """Pass chunks through, writing each to ``target`` on its way."""
    for chunk in chunks:
        target.write(chunk)
        yield chunk


def hash_file(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """sha256 of a file, read in bounded chunks. FileNotFoundError when it is missing."""
    with fs.open(path, "rb") as source:
        return sha256(_chunks(source))


def copy_file(
    source_fs: fsspec.AbstractFileSystem, source: str, target_fs: fsspec.AbstractFileSystem, target: str
) -> str:
    """Copy ``source`` to ``target`` in one pass and return the sha256 of the bytes copied.

    Readers of ``target`` see no file (or the old one) or the whole new one, as with
    storage.files.write_atomic: locally a temporary name, fsync and rename; on object
    stores one upload that becomes visible only when it completes, and is aborted on failure.
    FileNotFoundError when ``source`` is missing.
    """
    with source_fs.open(source, "rb") as reader:
        if is_local(target_fs):
            return _copy_local(reader, target)
        return _copy_remote(reader, target_fs, target)


def _copy_local(reader: BinaryIO, target: str) -> str:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with local_atomic_file(target) as out:
        return sha256(_written(_chunks(reader), out))


def _copy_remote(reader: BinaryIO, target_fs: fsspec.AbstractFileSystem, target: str) -> str:
    out = target_fs.open(target, "wb")
    try:
        digest = sha256(_written(_chunks(reader), out))
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
