"""Validated run parameters the example DAGs share (Airflow's form and the REST API check them).

Defaults come from the environment so one Airflow deployment can point the
examples at its job without editing them: ``STREAM_JOB_HOME``, ``STREAM_TOPICS``
(comma-separated), ``STREAM_GROUP``, ``STREAM_OUTPUT``, ``STREAM_APP_VERSION``; ``STREAM_OUTPUT_ASSET`` is the
asset the downstream example DAG is scheduled on.
Runs triggered from the UI, the CLI or the REST API have no logical date, so
nothing here or in the example DAGs uses ``ds``.
"""

from __future__ import annotations

import os

from airflow.sdk import Param

from airflow_kafka_stream.core.reset_strategy import StrategyKind
from airflow_kafka_stream.core.spark_kafka_options import SOURCE_FORMATS

STRATEGIES = [kind.value for kind in StrategyKind.choices()]


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def job_home() -> Param:
    return Param(_env("STREAM_JOB_HOME", "/tmp/airflow-kafka-stream/jobs/orders"), type="string", minLength=1,
                 title="Job home", description="The job's home directory: a path or a URL such as s3://bucket/jobs/x")


def pipeline(keep_running: bool = False) -> dict[str, Param]:
    """What the example pipeline reads and writes (ignored by your own application's arguments).

    ``keep_running`` (an upgrade's): each defaults to empty, and a run that gives none of them starts the new
    version with the running version's arguments; defaults there would move a job reading other topics onto
    the demo's."""
    topics = [t for t in _env("STREAM_TOPICS", "orders").split(",") if t]
    keep = "; empty keeps the running version's" if keep_running else ""
    return {
        "topics": _setting(None if keep_running else topics, "array", title="Topics",
                           description="Topics the example pipeline reads" + keep,
                           items={"type": "string", "minLength": 1}, minItems=1),
        "group": _setting(None if keep_running else _env("STREAM_GROUP", "orders-pipeline"), "string",
                          title="Consumer group", description="Where each batch's offsets are committed" + keep,
                          minLength=1),
        "output_path": _setting(None if keep_running else _env("STREAM_OUTPUT", "/tmp/airflow-kafka-stream/output/orders"),
                                "string", title="Output", description="The example pipeline's output directory" + keep,
                                minLength=1),
    }


def output_asset_uri() -> str:
    """The example job's output asset, as the downstream DAG (``stream_output_hourly``) names it."""
    return _env("STREAM_OUTPUT_ASSET", "file:///tmp/airflow-kafka-stream/output/orders")


def output_asset() -> dict[str, Param]:
    """The example pipeline's output as an Airflow asset (docs/assets.md): empty (the default, also with
    ``STREAM_OUTPUT_ASSET`` set: a job announces only what it is told to) declares none."""
    return {
        "output_asset": Param(None, type=["null", "string"],
                              title="Output asset", description="Announce each complete hour of event time in the "
                              "output as an event of this asset (e.g. file:///data/orders); empty: none"),
        "asset_every": Param("PT1H", type="string", pattern=r"^P", title="Asset window",
                             description="The event-time window each asset event announces (ISO 8601: PT15M, PT1H)"),
        "watermark_delay": Param("PT10M", type="string", pattern=r"^P", title="Watermark delay",
                                 description="How late an event may arrive before its window is complete"),
    }


def _setting(default, kind: str, **schema) -> Param:
    """A Param of JSON type ``kind`` that may be null when its default is None (not given)."""
    return Param(default, type=kind if default is not None else ["null", kind], **schema)


def source(default: str | None) -> dict[str, Param]:
    """The source the example pipeline reads with; ``None`` as the default (an upgrade's) keeps the running
    version's."""
    return {"source": Param(default, type=["null", "string"] if default is None else "string",
                            enum=[None, *SOURCE_FORMATS] if default is None else list(SOURCE_FORMATS),
                            title="Source", description="kafka_stream (this project's) or kafka (Spark's own "
                            "connector)" + ("; empty keeps the running version's, a value moves the job to it"
                                            if default is None else ""))}


def lag_objective() -> dict[str, Param]:
    """The watchdog's lag objective check (ops.objective): both null (the default) check the objective an
    objective sensor recorded in the job home, if any; a zero or negative value is refused."""
    return {
        "max_lag_seconds": Param(None, type=["null", "number"], exclusiveMinimum=0, title="Lag objective (s)",
                                 description="The time lag the job may have at most, in seconds (how old the "
                                             "oldest record not processed yet is); empty: the recorded objective"),
        "max_lag_for_seconds": Param(None, type=["null", "number"], exclusiveMinimum=0,
                                     title="Lag objective: allowed for (s)",
                                     description="How long the time lag may stay above the objective before the "
                                                 "watchdog task fails with a breach"),
    }
