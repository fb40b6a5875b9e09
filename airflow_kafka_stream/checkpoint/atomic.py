"""Filesystem helpers shared by the checkpoint tools: atomic writes, local detection, cheap probes."""

from __future__ import annotations

import os
from collections.abc import Iterator

import fsspec

from airflow_kafka_stream.errors import CheckpointFormatError
from airflow_kafka_stream.storage.files import is_local, join, temp_name
from airflow_kafka_stream.storage.files import url_to_fs as open_fs
from airflow_kafka_stream.storage.files import write_atomic as atomic_write

__all__ = ["any_names", "atomic_write", "exists_file", "is_dir", "is_local", "join", "list_names", "open_fs",
           "temp_name"]


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
        except NotADirectoryError as exc:
            file = directory
            while not os.path.isfile(file) and os.path.dirname(file) != file:
                file = os.path.dirname(file)
            raise CheckpointFormatError(
                f"{file} is a file, not a directory; pass the checkpoint directory (the one holding "
                "metadata, offsets/ and commits/)"
            ) from exc
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
