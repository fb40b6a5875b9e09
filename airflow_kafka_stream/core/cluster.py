"""Where a job runs and what its job home is called there, as pure functions.

The job home is read by two readers: the control plane through fsspec, and
Spark through Hadoop file systems. Rules:
1. The same place gets the same name on both sides: a local path is
   ``file:///abs/path`` for Spark (a bare path would mean the cluster's default
   file system, HDFS on most clusters); fsspec's ``s3://`` is Hadoop's
   ``s3a://``; ``gs://`` and ``hdfs://`` are the same on both; ``az://`` and
   ``abfs://`` become ``abfss://container@account.dfs.core.windows.net``.
2. The storage options that open it for fsspec open it for Hadoop too
   (``key`` -> ``fs.s3a.access.key``, ...); an option with no Hadoop
   counterpart is named, never silently dropped.
3. A job home on machine-local storage is refused for a cluster whose driver
   or executors run on other machines (its files would be split across disks
   and lost with a machine), unless the user declares the path shared (an NFS
   mount at the same path everywhere).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_stream.errors import InvalidInputError

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
#: The operator argument / CLI setting that declares a local path reachable from every node.
SHARED_SETTING = "job_home_shared"


@dataclass(frozen=True)
class Placement:
    """Where the parts of a Spark application run, read from the master URL and the deploy mode."""

    manager: str  # local, standalone, yarn, kubernetes
    deploy_mode: str  # client or cluster
    executors_elsewhere: bool
    driver_elsewhere: bool

    @property
    def all_on_this_machine(self) -> bool:
        return not (self.executors_elsewhere or self.driver_elsewhere)


def placement(master: str, deploy_mode: str | None = None) -> Placement:
    """Where driver and executors run for ``master`` (``local[2]``, ``spark://h:7077``, ``yarn``, ``k8s://...``)."""
    text = (master or "").strip()
    mode = (deploy_mode or "client").strip().lower()
    if mode not in ("client", "cluster"):
        raise InvalidInputError(f"deploy mode {deploy_mode!r} is neither client nor cluster", setting="deploy_mode")
    if text.startswith("local"):
        if mode == "cluster":
            raise InvalidInputError(f"master {text} runs in this process: deploy mode cluster does not apply",
                                    setting=("master", "deploy_mode"))
        return Placement("local", mode, False, False)
    if text.startswith("spark://"):
        hosts = [urlsplit(f"spark://{part}").hostname or "" for part in text[len("spark://"):].split(",")]
        remote = any(host not in LOOPBACK_HOSTS for host in hosts)
        return Placement("standalone", mode, remote, remote and mode == "cluster")
    if text == "yarn":
        return Placement("yarn", mode, True, mode == "cluster")
    if text.startswith("k8s://"):
        return Placement("kubernetes", mode, True, mode == "cluster")
    raise InvalidInputError(f"master {text!r} is not one of local[N], spark://host:port, yarn, k8s://https://host:port; "
                            "set it as the host of the spark connection", setting="master")


def is_local_url(url: str) -> bool:
    scheme = urlsplit(str(url)).scheme.lower()
    return scheme in ("", "file", "local")


def check_job_home_reach(url: str, where: Placement, shared: bool = False) -> None:
    """Refuse a machine-local job home when the driver or executors run on other machines (rule 3)."""
    if shared or where.all_on_this_machine or not is_local_url(url):
        return
    parts = "the driver and the executors" if where.driver_elsewhere else "the executors"
    raise InvalidInputError(
        f"job home {url} is on this machine's disk, but {parts} of this {where.manager} application run on other "
        "machines: checkpoints and state would be written to several disks and lost with any of them. Put the "
        f"job home on shared storage (s3://, gs://, abfs://, hdfs://), or, when this path is a shared mount "
        f"seen at the same path on every node, declare it with {SHARED_SETTING}=True",
        setting=("job_home", SHARED_SETTING))


def spark_url(url: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """The Hadoop name of an fsspec URL or local path (rule 1)."""
    text = str(url).strip()
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme in ("", "file", "local"):
        path = parts.path if scheme else text
        if not posixpath.isabs(path):
            raise InvalidInputError(f"{url} is a relative path: give the job home as an absolute path, so every "
                                    "process (driver, executors, control plane) names the same directory",
                                    setting="job_home")
        return "file://" + posixpath.normpath(path)
    if scheme in ("s3", "s3a"):
        return "s3a://" + text.split("://", 1)[1]
    if scheme in ("gs", "gcs"):
        return "gs://" + text.split("://", 1)[1]
    if scheme in ("abfs", "abfss", "az"):
        if "@" in parts.netloc:
            return f"abfss://{parts.netloc}{parts.path}"
        account = (storage_options or {}).get("account_name")
        if not account:
            raise InvalidInputError(f"{url}: Spark needs the storage account of this container; give "
                                    "account_name in the storage options, or write "
                                    "abfs://container@account.dfs.core.windows.net/path", setting="storage_options")
        return f"abfss://{parts.netloc}@{account}.dfs.core.windows.net{parts.path}"
    return text


#: s3fs storage options and the Hadoop S3A settings that mean the same.
_S3A_KEYS = {"key": "fs.s3a.access.key", "secret": "fs.s3a.secret.key", "token": "fs.s3a.session.token"}
_S3A_CLIENT_KWARGS = {"endpoint_url": "fs.s3a.endpoint", "region_name": "fs.s3a.endpoint.region"}


@dataclass(frozen=True)
class HadoopSettings:
    """Hadoop settings for a job home's storage options, split by whether they are secret."""

    settings: dict[str, str]
    secrets: dict[str, str]
    unmapped: tuple[str, ...]

    @property
    def all(self) -> dict[str, str]:
        return {**self.settings, **self.secrets}


def hadoop_settings(url: str, storage_options: Mapping[str, Any] | None) -> HadoopSettings:
    """The Hadoop settings that open ``url`` as ``storage_options`` open it for fsspec (rule 2)."""
    options = dict(storage_options or {})
    scheme = urlsplit(str(url)).scheme.lower()
    if scheme not in ("s3", "s3a"):
        return HadoopSettings({}, {}, tuple(sorted(options)))
    settings: dict[str, str] = {}
    secrets: dict[str, str] = {}
    unmapped: list[str] = []
    for name, value in options.items():
        if name in _S3A_KEYS and value is not None:
            (settings if name == "key" else secrets)[_S3A_KEYS[name]] = str(value)
        elif name == "anon" and value:
            settings["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
        elif name == "use_ssl":
            settings["fs.s3a.connection.ssl.enabled"] = "true" if value else "false"
        elif name == "client_kwargs" and isinstance(value, Mapping):
            for inner, inner_value in value.items():
                if inner in _S3A_CLIENT_KWARGS:
                    settings[_S3A_CLIENT_KWARGS[inner]] = str(inner_value)
                else:
                    unmapped.append(f"client_kwargs.{inner}")
        else:
            unmapped.append(name)
    if "fs.s3a.endpoint" in settings:
        # A custom endpoint (MinIO, a local S3) serves buckets by path, not by host name.
        settings.setdefault("fs.s3a.path.style.access", "true")
        if settings["fs.s3a.endpoint"].startswith("http://"):
            settings.setdefault("fs.s3a.connection.ssl.enabled", "false")
    if "fs.s3a.session.token" in secrets:
        settings["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    return HadoopSettings(settings, secrets, tuple(sorted(unmapped)))
