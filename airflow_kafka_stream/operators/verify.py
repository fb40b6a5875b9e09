"""Verify a job from a DAG: group offsets against the checkpoint and the topic, per partition."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_kafka_stream.core.lag_window import WindowStatus
from airflow_kafka_stream.core.verify import Status
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters

# Lazy imports: ops.verify and render.checkpoint (checkpoint, kafka; about 60 modules) wait for execute(), so a DAG
# file's parse does not load them.

#: Every status but OK fails the task by default (lag alone is not a problem).
DEFAULT_FAIL_ON = tuple(status.value for status in Status if status is not Status.OK)
#: Window statuses that fail the task by default: REWIND and STOP (WARN is logged, as the CLI exits 0 on it).
DEFAULT_FAIL_ON_WINDOW = tuple(status.value for status in WindowStatus if status.is_problem)


@refusals_name_parameters
class StreamVerifyOperator(JobHomeTask, BaseOperator):
    """Compare the consumer group with the checkpoint and the topic watermarks; push the report to XCom.

    The report is the CLI's ``verify --json``: overall status, total lag, and per partition the checkpoint
    and group offsets, watermarks, lag, status and why.

    :param job_home: the job's home directory (path or URL). Templated.
    :param kafka_conn_id: the ``kafka`` connection of the job's cluster.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param group: the consumer group (default: the one in the job's job.json). Templated.
    :param stall_threshold: ISO 8601 duration without a committed batch, while there is lag and the job
        runs, that counts as STALLED.
    :param fail_on: statuses that fail the task (default: every status but OK).
    :param window: ISO 8601 duration of Burrow's window rules over the group's recent looks (REWIND, STOP,
        WARN; docs/verify.md). Templated.
    :param fail_on_window: window statuses that fail the task (default: REWIND and STOP).
    """

    template_fields: Sequence[str] = ("job_home", "group", "stall_threshold", "window")

    def __init__(self, *, job_home: str, kafka_conn_id: str = "kafka_default", storage_conn_id: str | None = None,
                 group: str | None = None, stall_threshold: str = "PT10M",
                 fail_on: Sequence[str] = DEFAULT_FAIL_ON, window: str = "PT10M",
                 fail_on_window: Sequence[str] = DEFAULT_FAIL_ON_WINDOW, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_home = job_home
        self.kafka_conn_id = kafka_conn_id
        self.storage_conn_id = storage_conn_id
        self.group = group
        self.stall_threshold = stall_threshold
        known = {status.value for status in Status}
        unknown = sorted(set(fail_on) - known)
        if unknown:
            raise InvalidInputError(f"fail_on names unknown status(es) {unknown}; choose from {sorted(known)}")
        self.fail_on = list(fail_on)
        self.window = window
        unknown = sorted(set(fail_on_window) - {status.value for status in WindowStatus})
        if unknown:
            raise InvalidInputError(f"fail_on_window names unknown status(es) {unknown}; choose from "
                                    f"{[status.value for status in WindowStatus]}")
        self.fail_on_window = list(fail_on_window)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.ops.verify import verify
        from airflow_kafka_stream.render.checkpoint import verify_text

        hook = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id)
        result = verify(hook.context(group=self.group), stall_threshold=self.stall_threshold, window=self.window)
        self.log.info("verify %s:\n%s", self.job_home, verify_text(result))
        report = result.to_dict()
        failing = [p for p in report["partitions"] if p["status"] in self.fail_on]
        if failing:
            context["ti"].xcom_push(key="return_value", value=report)
            listed = "; ".join(f"{p['topic']}:{p['partition']} {p['status']} ({p['detail']})" for p in failing[:10])
            raise JobStateError(f"job {self.job_home}: {len(failing)} partition(s) failed verification: {listed}")
        window = report.get("window") or {}
        if window.get("status") in self.fail_on_window:
            context["ti"].xcom_push(key="return_value", value=report)
            listed = "; ".join(f"{f['topic']}:{f['partition']} {f['status']} ({f['detail']})"
                               for f in window["findings"][:10])
            raise JobStateError(f"job {self.job_home}: the group's window says {window['status']} "
                                f"({window['rule']}): {listed}")
        return report
