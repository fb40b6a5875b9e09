"""Small fsspec helpers: open a URL, write atomically, create exclusively."""

from __future__ import annotations

import json
import uuid
from typing import Any

import fsspec
from fsspec import AbstractFileSystem


def url_to_fs(url: str, storage_options: dict | None = None) -> tuple[AbstractFileSystem, str]:
    """The filesystem and the path inside it for a URL or a local path."""
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    return fs, path.rstrip("/") or path


def is_local(fs: AbstractFileSystem) -> bool:
    return "file" in _protocols(fs)


def _protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


def join(fs: AbstractFileSystem, *parts: str) -> str:
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts) if p)


def unstrip(fs: AbstractFileSystem, path: str) -> str:
    """A URL for a path of fs, so it can be handed to Spark or another process."""
    return fs.unstrip_protocol(path)


def write_atomic(fs: AbstractFileSystem, path: str, data: bytes | str) -> None:
    """Write a whole file so a reader sees the old content or the new, never a part.

    Local files go to a temporary name in the same directory and are renamed; an
    object store's single PUT is already atomic.
    """
    payload = data.encode() if isinstance(data, str) else data
    parent = path.rsplit("/", 1)[0]
    if is_local(fs):
        fs.makedirs(parent, exist_ok=True)
        tmp = f"{parent}/.{path.rsplit('/', 1)[-1]}.{uuid.uuid4().hex}.tmp"
        with fs.open(tmp, "wb") as out:
            out.write(payload)
        fs.mv(tmp, path)
    else:
        fs.pipe_file(path, payload)


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
