"""Submit a streaming job from a DAG: a detached driver through SparkSubmitHook, then wait without a worker slot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowSkipException

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.kafka_connector import KafkaConnector
from airflow_kafka_stream.core.redaction import secret_values
from airflow_kafka_stream.core.spark_kafka_options import check_source_format
from airflow_kafka_stream.core.values import flag, seconds
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.operators.lineage import JobLineage
from airflow_kafka_stream.operators.waiting import defer_after, wait_then_defer
from airflow_kafka_stream.ops.hot_standby import end_hot_standby, keep_hot_standby, set_wish
from airflow_kafka_stream.ops.submit import SubmitResult, conclude_start, recorded_submission, submit
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters
from airflow_kafka_stream.triggers.job_state import StreamJobStateTrigger

# Lazy imports: hooks.spark_driver (the Spark provider's SparkSubmitHook, all of Airflow's configuration) and
# ops.submission_plan wait for execute(), so a DAG file's parse does not load them.


@refusals_name_parameters
class StreamSubmitOperator(JobLineage, JobHomeTask, BaseOperator):
    """Start the job's driver unless this version already runs, then wait until it has committed batches.

    The driver is started by ``spark-submit`` (built by the Spark provider's ``SparkSubmitHook`` from the
    ``spark`` connection) in its own session, with its output in ``<job home>/logs/driver-*.log``: the
    stream outlives this task, which holds no worker slot while it waits (deferred). A retried or
    re-triggered submit never starts a second driver: a driver of the same version that runs or is
    starting is waited for; another version is refused. The Kafka settings of the ``kafka`` connection,
    secrets included, reach the driver in the environment, never in its arguments.

    XCom: the job's application id, generation, last committed batch and offsets, the pid and the
    driver log.

    :param job_home: the job's home directory (path or URL). Templated.
    :param app_version: the application version submitted (recorded in job.json and savepoints). Templated.
    :param application: the PySpark file to run (default: the package's example pipeline). Templated.
    :param application_args: arguments of ``application``. Without them, when ``topics``, ``group`` and
        ``output_path`` are given, the application gets the example pipeline's arguments (``--home``,
        ``--bootstrap``, ``--topic``, ``--group``, ``--output``, ``--app-version``, ``--starting-offsets``), so a
        version of your own that takes the same arguments drops in. Templated.
    :param topics: topics the example pipeline reads. Templated.
    :param group: consumer group the example pipeline commits to. Templated.
    :param output_path: the example pipeline's output directory. Templated.
    :param output_topic: the example pipeline writes its events to this Kafka topic exactly once (a transactional sink,
        docs/sink.md) instead of Parquet files under ``output_path``. Templated.
    :param skip_replays: with ``output_topic``: records a rewind (a reset, a restore) reads again are not written to
        the topic again (docs/sink.md). Templated.
    :param starting_offsets: where a fresh checkpoint starts (earliest, latest, group, offsets JSON).
    :param source: the source the example pipeline reads with: ``kafka_stream`` (this project's, the default) or
        ``kafka`` (Spark's own connector). Not given, a new version keeps the running version's; a new version that
        gives only this moves the job between the two on its checkpoint (docs/source.md). Templated.
    :param spark_conn_id: the ``spark`` connection (its host is the master: ``local[2]``, ``spark://...``).
    :param kafka_conn_id: the ``kafka`` connection whose extra holds the librdkafka configuration.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param spark_conf: Spark configuration for spark-submit ``--conf``. Templated.
    :param min_batches: batches the new run must commit before the task succeeds.
    :param timeout_seconds: how long to wait for those batches.
    :param poll_seconds: how often to read the job's status while waiting.
    :param deferrable: wait in the triggerer (default: Airflow's ``[operators] default_deferrable``).
    :param defer_after_seconds: with ``deferrable``, how long to wait here before deferring (a standby's
        handover is healthy within seconds; default: ``[airflow_kafka_stream] defer_after_seconds``, else 30;
        0 defers after one look).
    :param from_submission: start ``app_version`` exactly as it was last submitted to this job home
        (application, arguments, Spark settings recorded under ``submissions/``): a rollback or a restart. An
        empty ``app_version`` then starts the version the job ran last.
    :param executor_environment: the executors' Python environment on a cluster: ``packed`` (this environment
        packed and shipped with ``--archives``), the path or URL of such an archive, or
        ``python:/path/bin/python`` (installed at that path on every node). Default: Airflow's
        ``[airflow_kafka_stream] executor_environment`` when set, else Spark's own setting.
    :param deploy_mode: ``client`` (default; the driver runs detached on this machine) or ``cluster``
        (YARN, Kubernetes: the driver runs in the cluster, submitted and tracked by SparkSubmitHook).
    :param job_home_shared: declare a local job home path a shared mount seen at the same path on every
        node; without it a local job home is refused for a cluster whose executors run elsewhere.
    :param kafka_connector: where the driver's copy of Spark's Kafka connector (``format("kafka")``) comes from:
        ``auto`` (default: the jars installed beside this environment, unless the Spark settings or the Spark
        installation already bring it), ``bundled`` (always those), ``provided`` (the cluster has it). Default:
        Airflow's ``[airflow_kafka_stream] kafka_connector`` when set; a new version of a job keeps the running
        version's choice unless given (docs/cluster.md).
    :param hot_standby: keep a hot standby of the running version beside the job, which takes the job over
        within seconds when its driver dies (docs/standby.md); False ends it; None (default) keeps the job's
        setting. Templated (``"true"``, ``"false"``, ``""``).
    :param enabled: a switch (bool or template rendering to true/false); when false the task skips itself.
    :param output_asset: the example pipeline's output as an Airflow asset URI: each complete ``asset_every`` window of
        event time (``watermark_delay`` behind the newest event) is announced to Airflow once (docs/assets.md); a
        new version keeps the running version's unless given. Templated, as are ``asset_every`` and
        ``watermark_delay`` (ISO 8601 durations, default PT1H and PT10M).
    """

    template_fields: Sequence[str] = ("job_home", "app_version", "application", "application_args", "topics",
                                      "group", "output_path", "starting_offsets", "spark_conf", "min_batches", "source",
                                      "hot_standby", "enabled", "output_asset", "asset_every", "watermark_delay",
                                      "output_topic", "skip_replays")
    template_fields_renderers = {"spark_conf": "json", "application_args": "json"}
    #: Whether this task starts a new version of a job that runs (an upgrade's, a standby's, a check's): what it
    #: does not give then comes from the running version's submission (``ops.submission_plan``).
    starts_a_new_version = False

    def __init__(self, *, job_home: str, app_version: str, application: str | None = None,
                 application_args: Sequence[str] | None = None, topics: Sequence[str] | None = None,
                 group: str | None = None, output_path: str | None = None, starting_offsets: str = "earliest",
                 spark_conn_id: str = "spark_default", kafka_conn_id: str = "kafka_default",
                 storage_conn_id: str | None = None, spark_conf: dict[str, Any] | None = None,
                 min_batches: int = 1, timeout_seconds: float = 600.0, poll_seconds: float = 5.0,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 from_submission: bool = False, executor_environment: str | None = None,
                 deploy_mode: str | None = None, job_home_shared: bool = False,
                 defer_after_seconds: float | None = None, kafka_connector: str | None = None,
                 source: str | None = None, hot_standby: bool | str | None = None, enabled: bool | str = True,
                 output_asset: str | None = None, asset_every: str | None = None,
                 watermark_delay: str | None = None, output_topic: str | None = None,
                 skip_replays: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_topic, self.skip_replays = output_topic, skip_replays
        self.output_asset, self.asset_every, self.watermark_delay = output_asset, asset_every, watermark_delay
        self.enabled = enabled
        self.source = source
        self.hot_standby = hot_standby
        self.kafka_connector = KafkaConnector.of(kafka_connector).value if kafka_connector else None
        self.defer_after_seconds = defer_after_seconds
        self.from_submission = from_submission
        self.executor_environment = executor_environment
        self.deploy_mode = deploy_mode
        self.job_home_shared = job_home_shared
        self.job_home = job_home
        self.app_version = app_version
        self.application = application
        # Kept as given: a template ("{{ params.topics }}") renders to a list only at run time.
        self.application_args = application_args
        self.topics = topics
        self.group = group
        self.output_path = output_path
        self.starting_offsets = starting_offsets
        self.spark_conn_id = spark_conn_id
        self.kafka_conn_id = kafka_conn_id
        self.storage_conn_id = storage_conn_id
        self.spark_conf = dict(spark_conf or {})
        self.min_batches = min_batches
        self.timeout_seconds = timeout_seconds
        self.poll_seconds = poll_seconds
        self.deferrable = deferrable
        if not isinstance(min_batches, str):
            self._check_min_batches()
        seconds(timeout_seconds, "timeout_seconds")
        seconds(poll_seconds, "poll_seconds")

    def _check_min_batches(self) -> None:
        try:
            value = int(self.min_batches)
        except (TypeError, ValueError):
            value = -1
        if isinstance(self.min_batches, bool) or value < 0 or str(value) != str(self.min_batches).strip():
            raise InvalidInputError(f"min_batches must be a whole number >= 0, got {self.min_batches!r}")
        self.min_batches = value

    # -- starting ------------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        if not flag(self.enabled, "enabled"):
            raise AirflowSkipException("switched off for this run")
        self._check_min_batches()
        home, submission, launcher = self._launch_plan()
        self.app_version = submission.app_version  # from_submission with none given: the version the job ran last
        self._hot_standby()  # bad input is refused before the submit
        result = submit(home, submission, launcher)
        self.log.info("submit %s version %s: %s (%s)%s", self.job_home, self.app_version, result.action,
                      result.reason, f"; driver pid {result.pid}, log {result.driver_log}" if result.pid else "")
        return self._watch(context, result.to_dict())

    def _hot_standby(self) -> bool | None:
        """``hot_standby`` as given or rendered from a template (``"True"``, ``"false"``, ``""`` for none)."""
        value = self.hot_standby
        if value is None or isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("", "none"):
            return None
        if text in ("true", "false"):
            return text == "true"
        raise InvalidInputError(f"hot_standby must be true, false or empty (keep the job's setting), got {value!r}",
                                setting="hot_standby")

    def _launch_plan(self) -> tuple[Any, Any, Any]:
        """The job home, the submission to start (given here, or recorded earlier), and the launcher."""
        from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher
        from airflow_kafka_stream.ops.submission_plan import SubmissionRequest, plan_submission, running_submission

        if self.source:
            check_source_format(str(self.source))
        hook = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id)
        kafka = hook.driver_kafka_config()
        home = hook.home(require=False)  # a first submit makes the job home
        launcher = AirflowSparkLauncher(self.job_home, self.spark_conn_id, kafka, hook.storage_options())
        if self.from_submission:
            return home, recorded_submission(home, str(self.app_version)), launcher
        environment = self.executor_environment or conf.get("airflow_kafka_stream", "executor_environment",
                                                            fallback=None) or None
        request = SubmissionRequest(
            app_version=str(self.app_version), application=self.application,
            application_args=tuple(str(arg) for arg in as_list(self.application_args)),
            topics=tuple(as_list(self.topics)), group=self.group or None, output_path=self.output_path or None,
            starting_offsets=self.starting_offsets, spark_conf=dict(self.spark_conf or {}),
            master=launcher.master(), deploy_mode=self.deploy_mode, executor_environment=environment,
            job_home_shared=True if self.job_home_shared else None, spark_conn_id=self.spark_conn_id,
            kafka_conn_id=self.kafka_conn_id, kafka_connector=self._kafka_connector(), source=self.source or None,
            output_asset=self.output_asset or None, asset_every=self.asset_every or None,
            watermark_delay=self.watermark_delay or None, output_topic=self.output_topic or None,
            skip_replays=flag(self.skip_replays, "skip_replays"))
        running = running_submission(home) if self.starts_a_new_version else None
        submission = plan_submission(request, job_home=self.job_home, bootstrap_servers=kafka["bootstrap.servers"],
                                     running=running)
        return home, submission, launcher

    def _kafka_connector(self) -> str | None:
        """The operator's choice, else the deployment's ``[airflow_kafka_stream] kafka_connector``, else none (a new
        version keeps the running version's; a first submit takes auto). Submission refuses a word that is no choice, naming the setting."""
        return self.kafka_connector or conf.get("airflow_kafka_stream", "kafka_connector", fallback=None) or None

    def _watch(self, context: Context, submitted: dict[str, Any]) -> Any:
        """Wait (here, then deferred) until the driver that ``submitted`` describes runs with its batches."""
        context["ti"].xcom_push(key="submit", value=submitted)
        newer_than = submitted["submitted_at"] if submitted.get("action") != "already-running" else None
        trigger = StreamJobStateTrigger(
            job_home=self.job_home, target_states=[JobState.RUNNING.value], min_batches=self.min_batches,
            newer_than=newer_than,
            storage_conn_id=self.storage_conn_id, poll_seconds=self.poll_seconds,
            timeout_seconds=self.timeout_seconds, driver_pid=submitted.get("pid"), driver_host=submitted.get("host"))
        return wait_then_defer(self, context, trigger, "execute_complete", {"submitted": submitted},
                               defer_after(self.defer_after_seconds))

    # -- waiting -------------------------------------------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any], submitted: dict[str, Any] | None = None
                         ) -> dict[str, Any]:
        # dag.test() resumes a deferred task with the event alone, without the kwargs it deferred with.
        submitted = submitted or context["ti"].xcom_pull(task_ids=self.task_id, key="submit") or {}
        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        result = conclude_start(home, SubmitResult.of(submitted), event, self._secrets())
        self.log.info("job %s version %s is RUNNING: %s", self.job_home, self.app_version, event.get("message"))
        if not self.starts_a_new_version:
            self._keep_hot_standby(home)
        return result

    def _keep_hot_standby(self, home) -> None:
        """Record this submit's wish (once the driver runs: it wrote job.json at its start, so the two writes
        cannot cross), then the job's hot standby when it wants one (``ops.hot_standby``), or its end."""
        from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher

        wanted = self._hot_standby()
        set_wish(home, wanted)
        if wanted is False:
            end_hot_standby(home, "the job was submitted with hot_standby=False")
            return
        hook = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id)
        launcher = AirflowSparkLauncher(self.job_home, self.spark_conn_id, hook.driver_kafka_config(),
                                        hook.storage_options())
        standby = keep_hot_standby(home, launcher)
        if standby is not None:
            self.log.info("job %s: hot standby of version %s launched (pid %s, log %s)", self.job_home,
                          standby.app_version, standby.pid, standby.driver_log)

    def _secrets(self) -> list[str]:
        try:
            return secret_values(StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id).kafka_config())
        except Exception:  # noqa: BLE001 - a missing connection must not hide the job's own failure
            return []


def as_list(value: Any) -> list[Any]:
    """A list argument given as a list, a single value, or nothing."""
    if value is None or value == "":
        return []
    return list(value) if isinstance(value, list | tuple) else [value]
