"""Filesystem helpers shared by the checkpoint tools: atomic writes, local detection, cheap probes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import fsspec
from fsspec.implementations.local import LocalFileSystem


def open_fs(url: str, storage_options: dict | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and path of ``url`` (local path, ``file://``, ``s3://``, ...), without a trailing slash."""
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    return fs, path.rstrip("/") or "/"


def is_local(fs: fsspec.AbstractFileSystem) -> bool:
    return isinstance(fs, LocalFileSystem)


def join(*parts: str) -> str:
    return "/".join(part.strip("/") if index else part.rstrip("/") for index, part in enumerate(parts))


def temp_name(path: str) -> str:
    """A hidden temporary name beside ``path``; Spark ignores it (not a batch number)."""
    head, _, name = path.rpartition("/")
    return f"{head}/.{name}.{uuid.uuid4().hex}.tmp"


def atomic_write(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Write ``data`` so readers see either no file or the whole file.

    Local filesystems: write a temporary name in the same directory, then rename
    (atomic on POSIX). Object stores: a single put is already atomic.
    """
    if not is_local(fs):
        fs.pipe_file(path, data)
        return
    fs.makedirs(fs._parent(path), exist_ok=True)
    temp = temp_name(path)
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def exists_file(fs: fsspec.AbstractFileSystem, path: str) -> bool:
    if is_local(fs):
        return os.path.isfile(path)
    return fs.exists(path)


def any_names(fs: fsspec.AbstractFileSystem, directory: str) -> Iterator[str]:
    """Base names in ``directory``, lazily where the filesystem allows (so a caller can stop early)."""
    if is_local(fs):
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    yield entry.name
        except FileNotFoundError:
            return
        return
    try:
        listed = fs.ls(directory, detail=False)
    except FileNotFoundError:
        return
    for item in listed:
        yield item.rstrip("/").rsplit("/", 1)[-1]


def list_names(fs: fsspec.AbstractFileSystem, directory: str) -> list[str]:
    return list(any_names(fs, directory))


def is_dir(fs: fsspec.AbstractFileSystem, path: str) -> bool:
    if is_local(fs):
        return os.path.isdir(path)
    return fs.isdir(path)
