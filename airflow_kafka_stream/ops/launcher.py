"""Starting a driver: what a submission is, and the small interface every way of launching one implements.

Submit, launch replay (a rollback, a watchdog restart), the standby's launch and the upgrade all start
drivers through a :class:`Launcher`; they never build a command themselves. Two implementations exist:
``ops.spark_submit.SparkSubmitLauncher`` runs ``spark-submit`` directly (the command line, a CronJob, any
scheduler), and ``hooks.spark_driver.AirflowSparkLauncher`` builds the same command through the Spark
provider's ``SparkSubmitHook`` from an Airflow ``spark`` connection.

A :class:`Submission` is what a restart must repeat (application, arguments, Spark settings, cluster
settings) and is recorded in the job home; it never holds a secret. Kafka settings, secrets included, are
the launcher's and reach the driver through its environment only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

from airflow_kafka_stream.core.kafka_connector import KafkaConnector
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.storage.files import CLIENT_CONFIG_ENV

__all__ = ["CLIENT_CONFIG_ENV", "EXAMPLE_PIPELINE", "LaunchedDriver", "Launcher", "Submission", "check_launch",
           "driver_name", "example_pipeline_args"]


EXAMPLE_PIPELINE = str(Path(__file__).resolve().parents[1] / "jobs" / "example_pipeline.py")


@dataclass(frozen=True)
class Submission:
    """How one version of a job is started: enough to start it again exactly so, and no secret.

    ``master`` is the Spark master a direct launch uses; ``spark_conn_id`` and ``kafka_conn_id`` are the
    Airflow connections a launch from Airflow used. Either front-end replays a record the other wrote.
    """

    app_version: str
    application: str | None = None
    application_args: tuple[str, ...] = ()
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    deploy_mode: str | None = None
    executor_environment: str | None = None
    job_home_shared: bool = False
    master: str | None = None
    spark_conn_id: str | None = None
    kafka_conn_id: str | None = None
    #: Where the driver's copy of Spark's Kafka connector comes from (``core.kafka_connector``; None: auto).
    kafka_connector: str | None = None

    def __post_init__(self) -> None:
        if not str(self.app_version or "").strip():
            raise InvalidInputError("app_version is empty; give the application version being submitted",
                                    setting="app_version")
        object.__setattr__(self, "app_version", str(self.app_version))
        object.__setattr__(self, "application_args", tuple(str(arg) for arg in self.application_args))
        object.__setattr__(self, "spark_conf", {str(k): str(v) for k, v in dict(self.spark_conf).items()})
        if self.kafka_connector is not None:
            object.__setattr__(self, "kafka_connector", KafkaConnector.of(self.kafka_connector).value)

    @property
    def program(self) -> str:
        """The PySpark file that runs: the application, else the package's example pipeline."""
        return self.application or EXAMPLE_PIPELINE

    def to_record(self) -> dict[str, Any]:
        """The JSON the job home keeps under ``submissions/`` (no secret is ever part of a submission)."""
        record = asdict(self)
        record["application_args"] = list(self.application_args)
        record["spark_conf"] = dict(self.spark_conf)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Submission:
        """A recorded submission; keys it does not know (``submitted_at``) are ignored."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in record.items() if key in known}
        values["application_args"] = tuple(values.get("application_args") or ())
        values["spark_conf"] = dict(values.get("spark_conf") or {})
        values["job_home_shared"] = bool(values.get("job_home_shared"))
        return cls(**values)

    def with_version(self, app_version: str) -> Submission:
        return replace(self, app_version=str(app_version))


@dataclass(frozen=True)
class LaunchedDriver:
    """A driver just started: its local process (client mode) or its cluster application id, and its log."""

    pid: int | None
    host: str | None
    log: str
    application_id: str | None = None


class Launcher(Protocol):
    """Starts a driver for a submission, detached: it returns once the driver is on its way, never waits for
    the stream to end. ``extra_env`` is added to the driver's environment (a standby's token).

    A launcher may also have ``check(submission, extra_env)``, which refuses (InvalidInputError) what the
    driver would refuse only once started, such as its OpenTelemetry settings: :func:`check_launch` calls it
    before anything is recorded or started.
    """

    #: The librdkafka settings the driver gets (secrets included): what a check before the launch reaches Kafka with.
    kafka: Mapping[str, Any]

    def launch(self, submission: Submission, log_path: str,
               extra_env: Mapping[str, str] | None = None) -> LaunchedDriver: ...


def check_launch(launcher: Launcher, submission: Submission, extra_env: Mapping[str, str] | None = None) -> None:
    """The launcher's refusals that need no driver (its ``check``; a launcher without one refuses nothing)."""
    check = getattr(launcher, "check", None)
    if check is not None:
        check(submission, extra_env)


def example_pipeline_args(*, job_home: str, bootstrap_servers: str, topics: Sequence[str], group: str,
                          output_path: str, app_version: str, starting_offsets: str = "earliest",
                          source: str | None = None, output_topic: str | None = None,
                          skip_replays: bool = False) -> list[str]:
    """The example pipeline's arguments; a version of your own that takes the same arguments drops in. Its output
    is ``output_path`` (Parquet files) or ``output_topic`` (Kafka, exactly once: docs/sink.md)."""
    missing = [name for name, value in (("topics", list(topics)), ("group", group),
                                        ("output_path", output_path or output_topic)) if not value]
    if missing:
        raise InvalidInputError(f"the example pipeline needs {', '.join(missing)}; give them, or give your own "
                                "application and its arguments", setting=tuple(missing))
    if output_path and output_topic:
        raise InvalidInputError("output_path and output_topic both name the example pipeline's output, which goes "
                                "to one of them: give output_path for Parquet files or output_topic for a Kafka "
                                "topic (exactly once)", setting=("output_path", "output_topic"))
    if skip_replays and not output_topic:
        raise InvalidInputError("skip_replays is the Kafka sink's: give output_topic with it, or drop it",
                                setting="skip_replays")
    args = ["--home", job_home, "--bootstrap", str(bootstrap_servers), "--group", str(group),
            *(["--output", str(output_path)] if output_path else []), "--app-version", str(app_version),
            "--starting-offsets", starting_offsets, *(["--output-topic", str(output_topic)] if output_topic else []),
            *(["--skip-replays"] if skip_replays else [])]
    for topic in topics:
        args += ["--topic", str(topic)]
    if source:
        args += ["--source", str(source)]
    return args


def example_option(arguments: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` (e.g. ``--source``) in the example pipeline's arguments, or None."""
    found = [str(arg) for arg in arguments]
    return found[found.index(flag) + 1] if flag in found[:-1] else None


def example_pipeline_topics(submission: Submission) -> list[str]:
    """The topics a submission of the example pipeline (or of a version taking its arguments) reads; none for an
    application of the user's own, whose sources are known only once it runs."""
    if submission.program != EXAMPLE_PIPELINE:
        return []
    args = list(submission.application_args)
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--topic"]


def driver_name(job_home: str) -> str:
    """The Spark application name of a job's driver: ``stream-`` and the job home's last path segment."""
    return f"stream-{str(job_home).rstrip('/').rsplit('/', 1)[-1]}"

