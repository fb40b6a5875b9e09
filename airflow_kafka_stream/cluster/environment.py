"""Pack the Python environment executors need into one archive for ``spark-submit --archives``.

Spark's documented way to give executors Python packages (Python Package
Management, "Using Virtualenv") is a packed virtual environment shipped with
``--archives env.tar.gz#environment`` and ``spark.pyspark.python=
./environment/bin/python``. ``venv-pack`` refuses environments with editable
installs, and this package is usually installed editable while developed; a
``--py-files`` zip cannot carry the compiled C reader. So the archive is built
here from the installed distributions: a virtual environment layout
(``pyvenv.cfg``, ``bin/python``, ``lib/pythonX.Y/site-packages``) holding only
what runs on executors (pyspark's Python part, pyarrow, pandas, numpy,
confluent-kafka with its librdkafka, fsspec, pendulum, their requirements, and
this package with its compiled extension), without pyspark's jars (each node
has its Spark) and without Airflow (executors never import it).

Like ``venv-pack``, ``bin/python`` is a link to the base interpreter: every node
needs the same Python at the same path (same OS image). Archives are cached by
content, so a second pack of an unchanged environment costs a hash.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

import airflow_kafka_stream
from airflow_kafka_stream.errors import InvalidInputError

log = logging.getLogger(__name__)

#: What executors import: the Kafka source's readers and the Python worker's own needs.
EXECUTOR_DISTRIBUTIONS = ("pyspark", "pyarrow", "pandas", "numpy", "confluent-kafka", "fsspec", "pendulum")
PACKAGE = "airflow_kafka_stream"
#: The name the archive is unpacked under in each executor's working directory.
ARCHIVE_ALIAS = "environment"
#: Paths inside site-packages that executors never read (large, or Spark's own jars).
_SKIPPED = re.compile(r"(^|/)(__pycache__|tests)(/|$)|^pyspark/(jars|examples|data|licenses|sbin)/"
                      r"|^(pyarrow|numpy)/.*\.(h|hpp|pxd|pyx|pxi|cc)$|^pyarrow/include/|\.pyc$")


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "airflow-kafka-stream" / "envs"


def pack_executor_environment(cache_dir: str | os.PathLike | None = None,
                              extra_distributions: Iterable[str] = ()) -> Path:
    """An archive of the executors' environment (built now, or the cached one with the same content).

    ``extra_distributions``: more installed distributions your job's code runs on executors (e.g. ``s3fs``);
    their requirements come along.
    """
    files = sorted(set(_distribution_files([*EXECUTOR_DISTRIBUTIONS, *extra_distributions])) |
                   set(_package_files()))
    key = _content_key(files)
    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    target = folder / f"executor-env-{key}.tar.gz"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".packing-", suffix=".tar.gz")
    os.close(handle)
    os.chmod(temp, 0o644)
    try:
        _write_archive(Path(temp), files)
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    log.info("packed the executor environment into %s (%.0f MB)", target, target.stat().st_size / 1e6)
    _prune(folder, keep=KEEP_ARCHIVES)
    return target


#: Archives kept in the cache: a running job may still be reading an older one.
KEEP_ARCHIVES = 3


def _prune(folder: Path, keep: int) -> None:
    archives = sorted(folder.glob("executor-env-*.tar.gz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[keep:]:
        old.unlink(missing_ok=True)


def base_interpreter() -> str:
    """The interpreter a virtual environment's ``bin/python`` points at (the same on every node)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _distribution_files(names: Iterable[str]) -> Iterator[tuple[str, Path]]:
    """(path inside site-packages, file) of each named distribution and what it requires, recursively."""
    seen: set[str] = set()
    pending = list(names)
    while pending:
        name = _normal(pending.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise InvalidInputError(f"distribution {name!r} is not installed in {sys.prefix}; install it (the "
                                    "executors' environment is packed from this one)") from None
        if name == _normal(PACKAGE):
            continue  # installed editable here: its files are taken from the package folder
        for requirement in dist.requires or []:
            req = Requirement(requirement)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                pending.append(req.name)
        for entry in dist.files or []:
            relative = str(entry).replace(os.sep, "/")
            path = Path(dist.locate_file(entry)).resolve()
            if relative.startswith("..") or _SKIPPED.search(relative) or not path.is_file():
                continue
            yield relative, path


def _package_files() -> Iterator[tuple[str, Path]]:
    """This package's files, compiled extension included, from wherever it is imported."""
    root = Path(airflow_kafka_stream.__file__).resolve().parent
    if not any(root.glob("source/_kafka_arrow*.so")):
        raise InvalidInputError(f"the C reader (source/_kafka_arrow) is not built in {root}; install the package "
                                "with a C compiler present (pip install -e .), or executors would read in Python")
    for path in sorted(root.rglob("*")):
        relative = f"{PACKAGE}/{path.relative_to(root).as_posix()}"
        if path.is_file() and not _SKIPPED.search(relative):
            yield relative, path


def _content_key(files: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256(base_interpreter().encode())
    for relative, path in files:
        stat = path.stat()
        digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _write_archive(target: Path, files: list[tuple[str, Path]]) -> None:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = base_interpreter()
    config = (f"home = {os.path.dirname(base)}\ninclude-system-site-packages = false\n"
              f"version = {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}\n").encode()
    # Level 1: the archive is read once per node; packing time matters more than a few megabytes.
    with tarfile.open(target, "w:gz", compresslevel=1) as tar:
        _add_bytes(tar, "pyvenv.cfg", config)
        for name in ("python", "python3", version):
            link = tarfile.TarInfo(f"bin/{name}")
            link.type, link.linkname, link.mode = tarfile.SYMTYPE, base, 0o777
            tar.addfile(link)
        for relative, path in files:
            tar.add(str(path), arcname=f"lib/{version}/site-packages/{relative}", recursive=False)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
