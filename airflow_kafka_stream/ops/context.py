"""Resolve what an operation works on: job home, checkpoint, Kafka client config, group.

The CLI and the Airflow layer both build a :class:`JobContext`; explicit
arguments win over what the job home's job.json recorded at submit time.
Secrets (SASL passwords, SSL keys) never come from job.json: they come from a
client properties file (``--command-config``, as with Kafka's own tools) or,
in Airflow, from a connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_stream.core.offsets import TopicPartition, topics_of
from airflow_kafka_stream.core.redaction import is_secret_key
from airflow_kafka_stream.core.sink import Sink, resolve_sink, sink_from_spec
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.clients import check_client_config
from airflow_kafka_stream.kafka.properties import read_properties
from airflow_kafka_stream.storage.files import check_url
from airflow_kafka_stream.storage.jobhome import JobHome

__all__ = ["JobContext", "build_context", "read_properties"]

@dataclass
class JobContext:
    """Everything an operation needs to find the job's state."""

    home: JobHome | None
    checkpoint_url: str
    kafka_config: dict[str, Any] = field(default_factory=dict)
    group: str | None = None
    topics: list[str] = field(default_factory=list)
    storage_options: dict[str, Any] = field(default_factory=dict)
    sink: Sink | None = None

    @property
    def sink_path(self) -> str | None:
        """The output path of a file sink, whose ``_spark_metadata`` a reset keeps whole (None otherwise)."""
        return self.sink.path if self.sink is not None and self.sink.has_batch_log else None

    @property
    def name(self) -> str:
        if self.home is not None:
            return self.home.spec().get("job") or self.home.url.rsplit("/", 1)[-1]
        return self.checkpoint_url

    def topics_with(self, checkpoint_offsets: Iterable[TopicPartition]) -> list[str]:
        """The job's topics and those its checkpoint reads (a pattern job records no topic list)."""
        return sorted(set(self.topics) | set(topics_of(checkpoint_offsets)))

    def require_kafka(self) -> dict[str, Any]:
        if not self.kafka_config.get("bootstrap.servers"):
            raise InvalidInputError(
                "no Kafka bootstrap servers known for this job: give bootstrap_servers as host:port "
                "(or record kafka.bootstrap.servers in the job's job.json)", setting="bootstrap_servers"
            )
        return self.kafka_config

    def require_group(self) -> str:
        if not self.group:
            raise InvalidInputError("no consumer group known for this job: give its group (or record it in "
                                    "job.json)", setting="group")
        return self.group


def build_context(
    job_home: str | None = None,
    checkpoint: str | None = None,
    bootstrap_servers: str | None = None,
    group: str | None = None,
    client_config: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    sink_path: str | None = None,
    uses_kafka: bool = True,
    sink_kind: str | None = None,
) -> JobContext:
    """Combine explicit arguments with the job home's job.json; refuse bad input before anything is touched.

    An argument given as an empty string is refused rather than taken as "not given",
    so ``--group ""`` never silently means job.json's group. With ``uses_kafka`` the
    combined client config is checked by librdkafka here, once, for every operation.
    ``sink_kind``/``sink_path`` override job.json's sink (see ``core.sink.resolve_sink``,
    which also refuses an empty sink path, naming the ``--sink-kind`` way out).
    """
    explicit = {"job_home": job_home, "checkpoint": checkpoint, "bootstrap_servers": bootstrap_servers,
                "group": group}
    for setting, value in explicit.items():
        if value is not None and not str(value).strip():
            raise InvalidInputError(f"{setting} is empty; give a value, or leave it out to use the job's own",
                                    setting=setting)
    if sink_path is not None and not sink_path.strip():
        resolve_sink(None, sink_kind, sink_path)  # refuses it, naming the --sink-kind way out
    for url in (checkpoint, sink_path):
        if url is not None:
            check_url(url)
    opts = dict(storage_options or {})
    if not job_home and not checkpoint:
        raise InvalidInputError("say which job: give its job_home (or a checkpoint, for a bare checkpoint)",
                                setting="job_home")
    home = JobHome(job_home, opts) if job_home else None
    spec: dict[str, Any] = {}
    if home is not None:
        home.require()
        spec = home.spec()
    kafka: dict[str, Any] = {k: v for k, v in (spec.get("kafka") or {}).items() if not is_secret_key(k)}
    kafka.update(client_config or {})
    if bootstrap_servers is not None:
        kafka["bootstrap.servers"] = bootstrap_servers
    if uses_kafka and kafka:
        check_client_config(kafka)
    return JobContext(
        home=home,
        checkpoint_url=checkpoint if checkpoint is not None else home.checkpoint_url(),  # type: ignore[union-attr]
        kafka_config=kafka,
        group=group if group is not None else spec.get("group"),
        topics=list(spec.get("topics") or []),
        storage_options=opts,
        sink=resolve_sink(sink_from_spec(spec), sink_kind, sink_path),
    )
