"""Small fsspec helpers: open a URL, write atomically, create exclusively."""

from __future__ import annotations

import errno
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, BinaryIO

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from airflow_kafka_stream.errors import InvalidInputError

#: URL schemes a job home, checkpoint, savepoint or sink may use, and what fsspec needs for each.
#: Others are refused: read-only or process-local stores (http, ftp, memory) cannot hold state that
#: Spark and the control plane both reach, and offer no atomic create for the job lock.
SUPPORTED_SCHEMES: dict[str, str] = {
    "file": "", "local": "",
    "s3": "pip install s3fs", "s3a": "pip install s3fs",
    "gs": "pip install gcsfs", "gcs": "pip install gcsfs",
    "abfs": "pip install adlfs", "az": "pip install adlfs",
    "hdfs": "pyarrow, a JVM and Hadoop's libhdfs",
}
SUPPORTED_TEXT = ("a local path or file://, s3:// or s3a:// (pip install s3fs), gs:// or gcs:// (pip install "
                  "gcsfs), abfs:// or az:// (pip install adlfs), hdfs:// (pyarrow, a JVM and Hadoop's libhdfs)")
#: Schemes whose first path component is a bucket or container, so a URL without one names nothing.
_BUCKET_SCHEMES = {"s3", "s3a", "gs", "gcs", "abfs", "az"}
#: ``s3:/bucket/x``: a scheme with one slash, which fsspec would take for a relative local path.
_ONE_SLASH = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/(?!/)")


def check_url(url: str) -> None:
    """Refuse a URL this package cannot keep a job's files in, before anything opens it.

    Raises InvalidInputError naming the URL, what is wrong and the supported schemes.
    """
    text = str(url).strip()
    if not text:
        raise InvalidInputError("an empty path was given; pass a directory path or URL")
    protocol, path = fsspec.core.split_protocol(text)
    if protocol is None:
        if _ONE_SLASH.match(text):
            scheme, rest = text.split(":/", 1)
            raise InvalidInputError(f"{text} is a URL with a slash missing; write {scheme}://{rest}")
        return
    scheme = protocol.lower()
    if scheme in SUPPORTED_SCHEMES and protocol != scheme:
        raise InvalidInputError(f"{text}: write the URL scheme in lower case ({scheme}://)")
    if scheme not in SUPPORTED_SCHEMES:
        raise InvalidInputError(f"{text}: the URL scheme {protocol!r} is not supported; use "
                                f"{SUPPORTED_TEXT}")
    if scheme in _BUCKET_SCHEMES and not path.strip("/"):
        raise InvalidInputError(f"{text} names no bucket or container; write {scheme}://BUCKET/path/to/dir")


def url_to_fs(url: str, storage_options: dict | None = None) -> tuple[AbstractFileSystem, str]:
    """The filesystem and path of a URL or local path (``file://``, ``s3://``, ...), no trailing slash.

    Unsupported or malformed URLs, and supported ones whose fsspec package is missing,
    raise InvalidInputError (nothing has been opened yet).
    """
    check_url(url)
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        scheme = str(fsspec.core.split_protocol(url)[0]).lower()
        raise InvalidInputError(f"{url}: {scheme}:// needs a package that is not installed here "
                                f"({SUPPORTED_SCHEMES[scheme]})") from exc
    except (OSError, TypeError, ValueError) as exc:
        # Filesystems that connect on creation (hdfs) or reject a storage option fail here.
        first_line = (str(exc).splitlines() or [""])[0]
        raise InvalidInputError(f"cannot open {url} ({type(exc).__name__}: {first_line}); check the URL "
                                "and the storage options") from exc
    return fs, path.rstrip("/") or "/"


#: Environment variable carrying a job home's fsspec storage options (secrets included) as JSON to its driver,
#: so the runtime and the source's drain handshake open the home as the control plane does.
STORAGE_OPTIONS_ENV = "AIRFLOW_KAFKA_STREAM_STORAGE_OPTIONS"
#: Environment variable carrying the Kafka client settings (secrets included) as JSON to a driver.
CLIENT_CONFIG_ENV = "AIRFLOW_KAFKA_STREAM_CLIENT_CONFIG"


def json_object_from_env(name: str, holds: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON object a submit passed to this driver in the environment variable ``name`` (empty when unset);
    ``holds`` says what it is for the error (e.g. "fsspec storage options")."""
    text = (environ if environ is not None else os.environ).get(name)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{name} is not valid JSON ({exc.msg}); it must hold a JSON object of {holds}"
                                ) from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"{name} must hold a JSON object of {holds}")
    return value


def storage_options_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The storage options a submit passed to this driver in :data:`STORAGE_OPTIONS_ENV` (empty when none)."""
    return json_object_from_env(STORAGE_OPTIONS_ENV, "fsspec storage options", environ)


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


def write_atomic(fs: AbstractFileSystem, path: str, data: bytes | str, *, durable: bool = True) -> None:
    """Write a whole file so readers see either no file (or the old one) or the whole new one.

    Local filesystems: write a temporary name in the same directory, fsync (unless ``durable`` is False: a file
    rewritten every few seconds, such as a heartbeat, needs atomic, not durable), then rename (atomic on POSIX).
    Object stores: a single PUT is already atomic.
    """
    payload = data.encode() if isinstance(data, str) else data
    if not is_local(fs):
        fs.pipe_file(path, payload)
        return
    fs.makedirs(fs._parent(path), exist_ok=True)
    with local_atomic_file(path, durable=durable) as handle:
        handle.write(payload)


@contextmanager
def local_atomic_file(path: str, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A local file written under a temporary name, fsynced (when ``durable``), then renamed over ``path``
    (nothing on failure)."""
    temp = temp_name(path)
    try:
        with open(temp, "wb") as handle:
            yield handle
            handle.flush()
            if durable:
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


#: Reads of a file another process keeps replacing (a status beaten every second) that may start again.
READ_ATTEMPTS = 3


def read_json(fs: AbstractFileSystem, path: str) -> Any | None:
    """Parsed JSON of a file, or None when it does not exist.

    An object store's file replaced between opening and reading it (s3fs: ``FileExpired``, errno EBUSY,
    the object's ETag changed) is read again: the new version is as good as the old one.
    """
    for attempt in range(READ_ATTEMPTS):
        try:
            with fs.open(path, "rb") as src:
                return json.loads(src.read())
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == READ_ATTEMPTS - 1:
                raise
    return None


def dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"


def client_config_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Kafka client settings a launcher passed to this driver in :data:`CLIENT_CONFIG_ENV` (empty when
    none): a job's own application reads them with this (``from airflow_kafka_stream.runtime import ...``)."""
    return json_object_from_env(CLIENT_CONFIG_ENV, "librdkafka settings", environ)
