"""What a job tells the runtime (:class:`StreamConfig`) and how its run ended (:class:`RunResult`).

Plain data with its checks, apart from the runtime's machinery, so a job, a test or a tool can build
and validate a configuration without starting anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.asset_windows import OutputAsset, output_asset
from airflow_kafka_stream.core.sink import Sink, resolve_sink
from airflow_kafka_stream.core.spark_kafka_options import KAFKA_STREAM_FORMAT, check_source_format
from airflow_kafka_stream.core.values import seconds
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.clients import check_client_config

SOURCE_FORMAT = KAFKA_STREAM_FORMAT
EXIT_OK = 0
EXIT_FAILED = 1


@dataclass
class StreamConfig:
    """What the runtime needs to know about the job; secrets go in ``kafka_options`` only.

    ``kafka_options`` are librdkafka settings without the ``kafka.`` prefix (they
    reach the source as ``kafka.<name>`` and the group committer as they are);
    ``source_options`` are further options of the ``kafka_stream`` source. ``source_format`` is the source the
    job reads with: this project's ``kafka_stream`` or Spark's own connector ``kafka`` (the same options, mapped;
    see ``core.spark_kafka_options``).
    """

    job_name: str
    bootstrap_servers: str
    group_id: str
    topics: list[str] = field(default_factory=list)
    subscribe_pattern: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    kafka_options: dict[str, Any] = field(default_factory=dict)
    source_options: dict[str, Any] = field(default_factory=dict)
    storage_options: dict[str, Any] = field(default_factory=dict)
    source_format: str = SOURCE_FORMAT
    heartbeat_seconds: float = 5.0
    #: How far the clocks of this driver and of the hosts reading its status (Airflow workers, triggerers, the
    #: CLI) may be apart; every reader adds it before calling a heartbeat stale or a run older than a submit.
    clock_skew_seconds: float = 0.0
    stop_poll_seconds: float = 0.5
    #: A drain taking longer than this is logged and flagged in the status (``drain_overdue``). The
    #: runtime never cancels the batch on its own: whoever asked to stop withdraws or escalates to kill.
    drain_timeout_seconds: float = 300.0
    final_commit_timeout_seconds: float = 15.0
    app_version: str | None = None
    sink_path: str | None = None
    #: "file" (Spark's file sink, the default for a sink_path) or "idempotent" (output replaced per batch id);
    #: recorded in job.json, it decides what a reset or restore must keep whole (see core.sink).
    sink_kind: str | None = None
    #: With the Kafka sink (``sink_kind="kafka"``): records a rewind (a reset, a restore) reads again are not written
    #: again; the sink keeps how far it wrote each input partition in its transactions (docs/sink.md).
    skip_replays: bool = False
    #: A warm standby that gets no go within this long ends itself (its upgrade died or forgot it).
    standby_max_wait_seconds: float = 3600.0
    #: A warm standby reports READY only once the source of the query it started ahead of its go has answered
    #: (Spark's Python process serving it is up); no answer within this long fails the standby before the stop.
    standby_source_answer_seconds: float = 120.0
    #: The driver's Prometheus scrape endpoint (0: any free port, shown in the status); None: the
    #: ``AIRFLOW_KAFKA_STREAM_PROMETHEUS_PORT`` environment variable, else none. See docs/metrics.md.
    prometheus_port: int | None = None
    #: The output as an Airflow asset (its URI, e.g. ``file:///lake/orders``): each ``asset_every`` window of event
    #: time the query's watermark completes is announced to Airflow once (docs/assets.md). The query must define
    #: an event-time watermark (``withWatermark``).
    output_asset: str | None = None
    asset_every: str = "PT1H"
    #: The least time between two RUNNING OpenLineage events of the driver; None: the
    #: ``AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL`` environment variable, else 60. See docs/lineage.md.
    lineage_interval_seconds: float | None = None

    def validate(self) -> None:
        if not self.job_name:
            raise InvalidInputError("the job needs a name (StreamConfig.job_name); it appears in the status file")
        if not self.bootstrap_servers:
            raise InvalidInputError("bootstrap servers are required: set bootstrap_servers, e.g. host:9092")
        if not self.group_id:
            raise InvalidInputError("a consumer group is required for offset commits: set group_id")
        check_source_format(self.source_format, "source_format")
        if bool(self.topics) == bool(self.subscribe_pattern):
            raise InvalidInputError("give exactly one of topics or subscribe_pattern")
        for name in ("heartbeat_seconds", "stop_poll_seconds", "drain_timeout_seconds",
                     "standby_source_answer_seconds"):
            seconds(getattr(self, name), name)
        seconds(self.clock_skew_seconds, "clock_skew_seconds", allow_zero=True)
        check_client_config(self.client_config())  # the same refusal the control plane gives
        self.sink()  # refuses an unknown kind, a file sink without path, skip_replays without the Kafka sink
        self.asset()

    def sink(self) -> Sink | None:
        """The sink the job declares (core.sink), with its ``skip_replays``; None when it declares none."""
        declared = resolve_sink(None, self.sink_kind, self.sink_path)
        if declared is None:
            if self.skip_replays:
                raise InvalidInputError("skip_replays is the Kafka sink's: give output_topic (sink_kind kafka)",
                                        setting="skip_replays")
            return None
        return Sink(declared.kind, declared.path, self.skip_replays)

    def asset(self) -> OutputAsset | None:
        """The declared output asset, checked (None when the job declares none)."""
        return output_asset(self.output_asset, self.asset_every)

    def client_config(self) -> dict[str, Any]:
        return {**self.kafka_options, "bootstrap.servers": self.bootstrap_servers}


@dataclass(frozen=True)
class RunResult:
    """How a run ended: what the job prints on stop and what its exit code is."""

    state: str
    exit_code: int
    batches: int
    records: int
    last_batch_id: int | None
    last_offsets: dict | None
    error: str | None = None
    note: str | None = None

    def summary(self) -> str:
        text = (f"{self.state}: {self.batches} batches, {self.records} records this run; "
                f"last committed batch {self.last_batch_id}, offsets {json.dumps(self.last_offsets)}")
        if self.note:
            text = f"{text}; {self.note}"
        return f"{text}; error: {self.error}" if self.error else text


def utc_now() -> datetime:
    return datetime.now(UTC)
