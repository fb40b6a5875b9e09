"""Small fsspec helpers: open a URL, write atomically, create exclusively."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem


def url_to_fs(url: str, storage_options: dict | None = None) -> tuple[AbstractFileSystem, str]:
    """The filesystem and path of a URL or local path (``file://``, ``s3://``, ...), no trailing slash."""
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    return fs, path.rstrip("/") or "/"


def is_local(fs: AbstractFileSystem) -> bool:
    return isinstance(fs, LocalFileSystem)


def join(*parts: str) -> str:
    """Join path parts with single slashes (object-store paths have no os.sep)."""
    return "/".join(part.strip("/") if index else part.rstrip("/") for index, part in enumerate(parts))


def unstrip(fs: AbstractFileSystem, path: str) -> str:
    """A URL for a path of fs, so it can be handed to Spark or another process."""
    return fs.unstrip_protocol(path)


def temp_name(path: str) -> str:
    """A hidden temporary name beside ``path``; Spark ignores it (not a batch number)."""
    head, _, name = path.rpartition("/")
    return f"{head}/.{name}.{uuid.uuid4().hex}.tmp"


def write_atomic(fs: AbstractFileSystem, path: str, data: bytes | str) -> None:
    """Write a whole file so readers see either no file (or the old one) or the whole new one.

    Local filesystems: write a temporary name in the same directory, fsync, then
    rename (atomic on POSIX). Object stores: a single PUT is already atomic.
    """
    payload = data.encode() if isinstance(data, str) else data
    if not is_local(fs):
        fs.pipe_file(path, payload)
        return
    fs.makedirs(fs._parent(path), exist_ok=True)
    temp = temp_name(path)
    try:
        with open(temp, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        # A checksum left beside the target by Hadoop would no longer match: Spark fails reading it.
        head, _, name = path.rpartition("/")
        stale_crc = f"{head}/.{name}.crc"
        if os.path.exists(stale_crc):
            os.unlink(stale_crc)
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def create_exclusive(fs: AbstractFileSystem, path: str, data: bytes | str) -> bool:
    """Create a file only if it does not exist; False when it already exists.

    Uses O_EXCL locally and a conditional PUT (If-None-Match) on object stores.
    """
    payload = data.encode() if isinstance(data, str) else data
    parent = path.rsplit("/", 1)[0]
    if is_local(fs):
        fs.makedirs(parent, exist_ok=True)
    try:
        with fs.open(path, "xb") as out:
            out.write(payload)
    except FileExistsError:
        return False
    return True


def read_json(fs: AbstractFileSystem, path: str) -> Any | None:
    """Parsed JSON of a file, or None when it does not exist."""
    try:
        with fs.open(path, "rb") as src:
            return json.loads(src.read())
    except FileNotFoundError:
        return None


def dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"
