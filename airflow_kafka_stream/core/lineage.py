"""OpenLineage's view of a job: its identity, its datasets and its position, as plain values (docs/lineage.md).

The rules, in the order they are applied:

1. A Kafka topic is the dataset ``kafka://host:port`` / ``<topic>``, the host and port of the first bootstrap
   server (OpenLineage's naming; a ``SASL_SSL://`` style listener prefix is dropped).
2. A sink path is named by its storage: ``file`` / ``<absolute path>`` on local disk, ``s3://bucket`` /
   ``<key>`` (``s3a`` is ``s3``), ``gs://bucket``, ``hdfs://host:port``, ``abfss://container@account`` and so
   on for the others; a sink that is a Kafka topic (``kafka://host:port/topic``) is a topic.
3. A streaming job is one OpenLineage job, ``<namespace>`` / ``<job name>`` (``StreamConfig.job_name``, the
   ``job`` of job.json), whatever driver, version or generation runs it; each driver's run has its own run id.
4. A driver started by an Airflow task names that task's run as its parent: ``namespace/job/runId``, as the
   OpenLineage provider's ``lineage_parent_id`` macro spells it.

Pure: no OpenLineage client, no Airflow, no I/O. ``runtime/lineage.py`` turns these values into the client's
events; ``operators/lineage.py`` into Airflow's ``OperatorLineage``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_stream.core.offsets import PartitionOffsets

#: What the driver reads to link its run to the Airflow task that started it (the OpenLineage convention).
PARENT_ENV = "OPENLINEAGE_PARENT_ID"
ROOT_PARENT_ENV = "OPENLINEAGE_ROOT_PARENT_ID"
#: The OpenLineage namespace of the job (the client's and Airflow's convention); ``default`` when unset.
NAMESPACE_ENV = "OPENLINEAGE_NAMESPACE"
DEFAULT_NAMESPACE = "default"
#: How often a driver emits a RUNNING event at most (seconds); ``StreamConfig.lineage_interval_seconds``.
INTERVAL_ENV = "AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL"
DEFAULT_INTERVAL_SECONDS = 60.0
#: The client's own switches: any of these configures it (an ``openlineage.yml`` file does too).
CLIENT_CONFIG_ENVS = ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG")
CLIENT_CONFIG_PREFIX = "OPENLINEAGE__TRANSPORT"
DISABLED_ENV = "OPENLINEAGE_DISABLED"
#: Who emits this package's events (the spec's ``producer``, a URI), and the prefix of its own facets' schema URLs.
PRODUCER = "urn:airflow-kafka-stream:runtime"
FACET_SCHEMA_PREFIX = "urn:airflow-kafka-stream:facets:"
#: Storage schemes OpenLineage names by another spelling.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfs": "abfss", "az": "abfss"}


@dataclass(frozen=True)
class DatasetId:
    """One dataset as OpenLineage names it."""

    namespace: str
    name: str


@dataclass(frozen=True)
class ParentRun:
    """The run that started this one: an Airflow task's (``parent``) and its DAG run's (``root``)."""

    namespace: str
    name: str
    run_id: str
    root: ParentRun | None = None


def facet_schema(properties: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of one of this package's facets: ``properties`` besides the spec's ``_producer`` and
    ``_schemaURL``, nothing else allowed."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": {"_producer": {"type": "string"}, "_schemaURL": {"type": "string"}, **properties},
            "required": ["_producer", "_schemaURL", *required], "additionalProperties": False}


def kafka_namespace(bootstrap_servers: str) -> str:
    """``kafka://host:port`` of the first bootstrap server (rule 1)."""
    first = str(bootstrap_servers).split(",")[0].strip()
    return f"kafka://{first.split('://', 1)[-1]}"


def topic_dataset(bootstrap_servers: str, topic: str) -> DatasetId:
    return DatasetId(kafka_namespace(bootstrap_servers), topic)


def sink_dataset(path: str) -> DatasetId:
    """The dataset a sink path names (rule 2)."""
    if "://" not in path:
        return DatasetId("file", os.path.abspath(path))
    parts = urlsplit(path)
    scheme = _SCHEME_ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    if scheme == "file":
        return DatasetId("file", parts.path or "/")
    if scheme == "kafka":  # the transactional Kafka sink's kafka://<bootstrap servers>/<topic>
        return topic_dataset(parts.netloc, parts.path.strip("/"))
    return DatasetId(f"{scheme}://{parts.netloc}", parts.path.lstrip("/") or "/")


def job_datasets(spec: Mapping[str, Any], topics: Sequence[str] = (), sink_path: str | None = None,
                 bootstrap_servers: str | None = None) -> tuple[list[DatasetId], list[DatasetId]]:
    """Inputs and outputs of a job from its job.json ``spec``, else from what a task was given.

    A pattern subscription (``subscribe_pattern``) names no topic up front: its inputs are the topics seen in
    ``offsets`` (a driver's RUNNING events), never a guess.
    """
    servers = bootstrap_servers or (spec.get("kafka") or {}).get("bootstrap.servers")
    named = list(spec.get("topics") or topics or [])
    sink = spec.get("sink") or {}
    path = sink.get("path") or spec.get("sink_path") or sink_path
    inputs = [topic_dataset(servers, topic) for topic in named] if servers else []
    return inputs, [sink_dataset(path)] if path else []


def offset_positions(offsets: PartitionOffsets | None) -> dict[str, dict[str, int]]:
    """Per topic, the next offset of each partition (``{"0": 120, ...}``): the job's position in it."""
    positions: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets or {}):
        positions.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return positions


def parse_parent(text: str | None, root_text: str | None = None) -> ParentRun | None:
    """``namespace/job/runId`` (rule 4) as a parent run; None when absent or not of that shape (the run id must be
    a UUID: a broken link is worse than none)."""
    if not text:
        return None
    namespace, sep, rest = str(text).strip().partition("/")
    name, sep2, run_id = rest.rpartition("/")
    if not (sep and sep2 and namespace and name and _is_uuid(run_id)):
        return None
    return ParentRun(namespace, name, run_id, parse_parent(root_text) if root_text else None)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def client_configured(env: Mapping[str, str], config_files: Sequence[str] = ()) -> bool:
    """Whether the OpenLineage client is configured the way it configures itself: ``OPENLINEAGE_URL``,
    ``OPENLINEAGE_CONFIG``, ``OPENLINEAGE__TRANSPORT...`` variables, or an ``openlineage.yml`` found (given in
    ``config_files``); ``OPENLINEAGE_DISABLED=true`` turns it off. Unconfigured, the client would print events
    to the console: here that means off."""
    if str(env.get(DISABLED_ENV, "")).strip().lower() == "true":
        return False
    if any(env.get(name) for name in CLIENT_CONFIG_ENVS) or list(config_files):
        return True
    return any(key.startswith(CLIENT_CONFIG_PREFIX) and value for key, value in env.items())


def end_event_type(failed: bool, aborted: bool) -> str:
    """How a driver's run ends in OpenLineage: FAIL with an error (a failed query, a fence), ABORT when it was
    stopped abnormally (another driver took the job from it, a kill stopped its query at once), COMPLETE after a
    graceful stop (drained)."""
    if failed:
        return "FAIL"
    return "ABORT" if aborted else "COMPLETE"


def due(now: float, last: float | None, interval: float) -> bool:
    """Whether a RUNNING event is due: the first one, then at most one per ``interval`` seconds."""
    return last is None or now - last >= interval
