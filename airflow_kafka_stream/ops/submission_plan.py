"""Which submission a start asks for: the same answer from the command line and from Airflow.

A start gives some of a submission (an application, its arguments, the example pipeline's topics, group and
output, Spark settings, where the driver runs); the rest comes from rules that hold for both front-ends:

1. No arguments, and no application of the user's own or the example's topics, group and output all given:
   the example pipeline's arguments (a version of the user's own that takes the same arguments drops in).
2. A new version of a job that has run (an upgrade, a standby): where and how the running version runs
   carries over unless given (master, deploy mode, executor environment, a shared job home, where its copy of
   Spark's Kafka connector comes from), and given Spark
   settings add to or change the running version's. An upgrade of the same program that gives neither an
   application, arguments nor the example's settings starts the running version's application with its
   arguments, the version changed: an upgrade of the same program needs only a version (and may change only the
   example pipeline's source: ``kafka_stream`` or Spark's ``kafka``).
3. Nothing says where: ``local[*]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from airflow_kafka_stream.core.asset_windows import asset_window, output_asset
from airflow_kafka_stream.core.durations import parse_duration
from airflow_kafka_stream.ops.launcher import Submission, example_option, example_pipeline_args
from airflow_kafka_stream.ops.submit import recorded_submission
from airflow_kafka_stream.storage.jobhome import JobHome

DEFAULT_MASTER = "local[*]"
#: The example pipeline's flags of its output asset (docs/assets.md).
ASSET_FLAGS = ("--output-asset", "--asset-every", "--watermark-delay")


@dataclass(frozen=True)
class SubmissionRequest:
    """What a start gives; None (or empty) is "not given"."""

    app_version: str
    application: str | None = None
    application_args: Sequence[str] = ()
    topics: Sequence[str] = ()
    group: str | None = None
    output_path: str | None = None
    #: The example pipeline's output topic, written exactly once (``--output-topic``, docs/sink.md).
    output_topic: str | None = None
    #: The example pipeline's Kafka sink skips records a rewind reads again (``--skip-replays``, docs/sink.md).
    skip_replays: bool = False
    starting_offsets: str = "earliest"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    master: str | None = None
    deploy_mode: str | None = None
    executor_environment: str | None = None
    job_home_shared: bool | None = None
    spark_conn_id: str | None = None
    kafka_conn_id: str | None = None
    kafka_connector: str | None = None
    #: The example pipeline's source (``--source``): kafka_stream or kafka; None keeps the running version's.
    source: str | None = None
    #: The example pipeline's output asset (``--output-asset``, ``--asset-every``, ``--watermark-delay``; see
    #: docs/assets.md); None keeps the running version's.
    output_asset: str | None = None
    asset_every: str | None = None
    watermark_delay: str | None = None

    def asset_options(self) -> list[tuple[str, str]]:
        """The example pipeline's asset flags this start gives (refused, named, when the pipeline would refuse
        them)."""
        output_asset(self.output_asset)
        if self.asset_every:
            asset_window(self.asset_every)
        if self.watermark_delay:
            parse_duration(self.watermark_delay, "watermark_delay")
        given = zip(ASSET_FLAGS, (self.output_asset, self.asset_every, self.watermark_delay), strict=True)
        return [(flag, str(value)) for flag, value in given if value]

    @property
    def names_example_settings(self) -> bool:
        return bool(self.topics or self.group or self.output_path or self.output_topic)

    @property
    def uses_example_arguments(self) -> bool:
        """Rule 1: the example pipeline's arguments are what this start passes."""
        example_complete = bool(self.topics and self.group and (self.output_path or self.output_topic))
        return not self.application_args and (not self.application or example_complete)


def plan_submission(request: SubmissionRequest, *, job_home: str, bootstrap_servers: str,
                    running: Submission | None = None) -> Submission:
    """The submission a start asks for, by the rules of the module docstring (``running``: the running
    version's recorded submission, for a new version of a job that has run)."""
    given: dict = {name: getattr(request, name) for name in (
        "master", "deploy_mode", "executor_environment", "spark_conn_id", "kafka_conn_id", "kafka_connector")
        if getattr(request, name)}
    if request.job_home_shared is not None:
        given["job_home_shared"] = bool(request.job_home_shared)
    if request.spark_conf:
        given["spark_conf"] = dict(request.spark_conf)
    if running is not None:
        inherited = {"master": running.master, "deploy_mode": running.deploy_mode,
                     "executor_environment": running.executor_environment,
                     "job_home_shared": running.job_home_shared, "spark_conf": running.spark_conf,
                     "kafka_connector": running.kafka_connector}
        given = {**{name: value for name, value in inherited.items() if value}, **given}
        if request.spark_conf:
            given["spark_conf"] = {**running.spark_conf, **request.spark_conf}
        if not request.application and not request.application_args and not request.names_example_settings:
            arguments = _with_option(running.application_args, "--app-version", str(request.app_version))
            if request.source:
                arguments = _with_option(arguments, "--source", request.source)
            for flag, value in request.asset_options():
                arguments = _with_option(arguments, flag, value)
            return replace(running, app_version=str(request.app_version), application_args=arguments, **given)
    arguments = tuple(str(arg) for arg in request.application_args)
    source = request.source or (example_option(running.application_args, "--source") if running is not None else None)
    if request.uses_example_arguments:
        arguments = tuple(example_pipeline_args(
            job_home=job_home, bootstrap_servers=bootstrap_servers, topics=list(request.topics),
            group=request.group or "", output_path=request.output_path or "", app_version=str(request.app_version),
            starting_offsets=request.starting_offsets, source=source, output_topic=request.output_topic,
            skip_replays=request.skip_replays))
        for flag, value in request.asset_options() or _asset_options(running):
            arguments = _with_option(arguments, flag, value)
    given.setdefault("master", DEFAULT_MASTER)
    return Submission(str(request.app_version), request.application, arguments, **given)


def _asset_options(running: Submission | None) -> list[tuple[str, str]]:
    """The running version's asset flags, which a new version of the example's arguments keeps (as its source)."""
    if running is None:
        return []
    return [(flag, value) for flag in ASSET_FLAGS if (value := example_option(running.application_args, flag))]


def running_submission(home: JobHome) -> Submission | None:
    """The running (or last) version's recorded submission, which a new version of the same program starts
    from; None for a job never submitted."""
    if not home.exists():
        return None
    status = home.status_document()
    version = (status.app_version if status else None) or home.spec().get("version")
    if not version or home.submission(str(version)) is None:
        return None
    return recorded_submission(home, str(version))


def _with_option(arguments: Sequence[str], flag: str, value: str) -> tuple[str, ...]:
    """The example pipeline's arguments with ``flag`` set to ``value``: replaced where given (``--app-version``),
    else added (``--source`` of a version that read with the default source)."""
    found = [str(arg) for arg in arguments]
    if flag in found[:-1]:
        found[found.index(flag) + 1] = value
    elif flag != "--app-version":
        found += [flag, value]
    return tuple(found)
