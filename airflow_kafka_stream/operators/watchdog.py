"""Keep a streaming job running from a schedule: restart it when it died or got stuck, within limits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_kafka_stream.core.watchdog import WATCHDOG, Policy
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import StreamJobPageLink, announce_job_home
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters

# Lazy imports: hooks.spark_driver (the Spark provider), ops.watchdog, tasks.objective_check and stream_stats wait
# for execute(), so a DAG file's parse does not load them.


@refusals_name_parameters
class StreamWatchdogOperator(BaseOperator):
    """Restart the job when it is dead (FAILED, driver gone) or stuck (running, no batch committed for
    ``stuck_after_seconds`` while records wait), as it was last submitted, with a backoff that doubles per
    restart; give up (fail loudly, with the driver's last error) after ``max_restarts`` restarts within
    ``window_seconds``, counting the supervisor's restarts of the job too (one budget; the give-up names
    how many each made). A job stopped on purpose (STOPPED, or a stop requested) is never restarted. Every
    restart is a history record. XCom: what the watchdog saw and did.

    Restarting needs the version's recorded submission: submit the job with ``StreamSubmitOperator`` first.

    :param job_home: the job's home directory (path or URL). Templated.
    :param stuck_after_seconds: how long the last committed batch may stay the same while records wait.
    :param max_restarts: restarts allowed within ``window_seconds`` before giving up.
    :param window_seconds: the window of the restart limit.
    :param backoff_seconds: the wait after a restart before the next one (doubles with each restart).
    :param max_heartbeat_age: seconds without a heartbeat after which a running job counts as dead.
    :param kafka_conn_id: the ``kafka`` connection (lag, and the restarted driver's settings).
    :param spark_conn_id: the ``spark`` connection the driver is restarted through (default: the recorded one).
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param max_lag_seconds: the job's lag objective, checked once after the watchdog's pass: the time lag the
        job may have at most (seconds, above 0). A breach (above it for ``for_seconds``, across runs) fails the
        task with the partitions, their lag and trend (ops.objective). None: the objective recorded in the job
        home by an objective sensor, if any. Templated.
    :param for_seconds: how long the time lag may stay above ``max_lag_seconds`` (seconds, above 0). Templated.
    """

    template_fields: Sequence[str] = ("job_home", "max_lag_seconds", "for_seconds")
    operator_extra_links = (StreamJobPageLink(),)
    #: Who its restarts are recorded as: the restart budget is one for the watchdog and the supervisor.
    restarter = WATCHDOG

    def __init__(self, *, job_home: str, stuck_after_seconds: float = 600.0, max_restarts: int = 3,
                 window_seconds: float = 3600.0, backoff_seconds: float = 30.0, max_heartbeat_age: float = 30.0,
                 kafka_conn_id: str = "kafka_default", spark_conn_id: str | None = None,
                 storage_conn_id: str | None = None, max_lag_seconds: float | str | None = None,
                 for_seconds: float | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from airflow_kafka_stream.tasks.objective_check import refuse_bad_objective

        refuse_bad_objective(max_lag_seconds, for_seconds)
        self.max_lag_seconds, self.for_seconds = max_lag_seconds, for_seconds
        try:
            self.policy = Policy(stuck_after_seconds, max_restarts, window_seconds, backoff_seconds, max_heartbeat_age)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None
        self.job_home = job_home
        self.kafka_conn_id = kafka_conn_id
        self.spark_conn_id = spark_conn_id
        self.storage_conn_id = storage_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        announce_job_home(self, context, self.job_home)
        from airflow_kafka_stream.hooks.spark_driver import AirflowSparkLauncher
        from airflow_kafka_stream.ops.watchdog import watch

        hook = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id)
        kafka = hook.kafka_config()
        home = hook.home()
        launcher = AirflowSparkLauncher(self.job_home, self.spark_conn_id or self._recorded_conn(home),
                                        hook.driver_kafka_config(), hook.storage_options())
        # ops.watchdog.watch logs the decision (once: the task log gets that line).
        result = watch(home, kafka, self.policy, launcher, restarter=self.restarter)
        if result.restarted is not None:
            from airflow_kafka_stream.operators import stream_stats

            stream_stats.incr(stream_stats.WATCHDOG_RESTARTS, home.spec().get("job"))
        from airflow_kafka_stream.tasks.objective_check import check_objective

        check_objective(self, context, home, result.to_dict())
        return result.to_dict()

    @staticmethod
    def _recorded_conn(home) -> str:
        """The spark connection the running version was submitted through, else ``spark_default``."""
        status = home.status_document()
        # The runtime does not write app_version into status.json: the version is job.json's.
        version = (status.app_version if status else None) or home.spec().get("version")
        recorded = home.submission(str(version)) if version else None
        return (recorded or {}).get("spark_conn_id") or "spark_default"
