"""Savepoints from a DAG: take one (live while the job runs), restore one into a new checkpoint generation, and
keep their number in check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowSkipException

from airflow_kafka_stream.core.values import flag
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.operators.lineage import JobLineage
from airflow_kafka_stream.ops.savepoints import LATEST, create, prune, resolve_id, restore, retention
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters

# Lazy imports: render.savepoints waits for execute(), so a DAG file's parse does not load it.


@refusals_name_parameters
class StreamSavepointOperator(JobHomeTask, BaseOperator):
    """Take a savepoint of the job's last committed batch: a periodic restore point.

    While the job runs the savepoint is live: the batch is copied without stopping the job or slowing its
    batches, and its manifest says ``live: true``; a stopped job's savepoint is taken as after a stop. Refused
    (the task fails, nothing written) while the job is starting or draining, before its first committed batch,
    or while another operation holds the job lock. Restore it with :class:`StreamRestoreOperator`; prune old
    ones with :class:`StreamSavepointHousekeepingOperator`. XCom: the savepoint's manifest summary (id, batch,
    offsets, live, ...).

    :param job_home: the job's home directory (path or URL). Templated.
    :param app_version: the version recorded in the manifest (default: the running job's). Templated.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param enabled: a switch (bool or template rendering to true/false); when false the task skips itself.
    """

    template_fields: Sequence[str] = ("job_home", "app_version", "enabled")

    def __init__(self, *, job_home: str, app_version: str | None = None, storage_conn_id: str | None = None,
                 enabled: bool | str = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_home = job_home
        self.app_version = app_version
        self.storage_conn_id = storage_conn_id
        self.enabled = enabled

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.render.savepoints import created_text

        if not flag(self.enabled, "enabled"):
            raise AirflowSkipException("switched off for this run")
        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        version = str(self.app_version).strip() if self.app_version is not None else ""
        made = create(home, app_version=version or None)  # an empty rendered template means "the job's own"
        self.log.info("savepoint of %s: %s", self.job_home, created_text(made))
        return made.to_dict()


@refusals_name_parameters
class StreamRestoreOperator(JobLineage, JobHomeTask, BaseOperator):
    """Start a new checkpoint generation from a savepoint; the job resumes there on its next start.

    With ``drop_state`` the new generation is empty and seeded with the savepoint's offsets only (Flink's
    allowNonRestoredState), for a new version whose query changed incompatibly. Refused while the job runs,
    and refused when a file sink already logged the batch ids the new generation would write (unless
    ``allow_sink_batch_log``). XCom: the savepoint restored and the new generation.

    :param job_home: the job's home directory (path or URL). Templated.
    :param savepoint_id: the savepoint, or ``latest`` (the newest). Templated.
    :param drop_state: seed a fresh checkpoint with the savepoint's offsets, dropping operator state. Templated
        (``"true"``/``"false"``).
    :param allow_sink_batch_log: proceed although a file sink logged the batch ids the generation will write.
    :param sink_kind: ``file``, ``idempotent`` or ``none``, over the sink job.json records (see core.sink).
    :param sink_path: the file sink's output directory, over the one job.json records.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param kafka_conn_id: the ``kafka`` connection of the job's cluster: when given, the restore is also refused
        while another consumer is a member of the job's group (it names their client ids and hosts).
    :param enabled: a switch (bool or template rendering to true/false); when false the task skips itself.
    """

    template_fields: Sequence[str] = ("job_home", "savepoint_id", "enabled", "drop_state")

    def __init__(self, *, job_home: str, savepoint_id: str = LATEST, drop_state: bool | str = False,
                 allow_sink_batch_log: bool = False, storage_conn_id: str | None = None,
                 enabled: bool | str = True, sink_kind: str | None = None, sink_path: str | None = None,
                 kafka_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enabled = enabled
        if not savepoint_id or not str(savepoint_id).strip():
            raise InvalidInputError("savepoint_id is empty; give a savepoint id or 'latest'")
        self.job_home = job_home
        self.savepoint_id = savepoint_id
        self.drop_state = drop_state
        self.allow_sink_batch_log = allow_sink_batch_log
        self.storage_conn_id = storage_conn_id
        self.sink_kind = sink_kind
        self.sink_path = sink_path
        self.kafka_conn_id = kafka_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.render.savepoints import restore_text

        if not flag(self.enabled, "enabled"):
            raise AirflowSkipException("switched off for this run")
        drop_state = flag(self.drop_state, "drop_state")  # rendered from a param, "False" must not read as true
        hook = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id)
        home = hook.home()
        ctx = hook.context(sink_kind=self.sink_kind, sink_path=self.sink_path) if self.kafka_conn_id else None
        result = restore(home, resolve_id(home, self.savepoint_id), drop_state=drop_state,
                         allow_sink_batch_log=self.allow_sink_batch_log, sink_kind=self.sink_kind,
                         sink_path=self.sink_path, kafka_config=ctx.kafka_config if ctx else None,
                         group=ctx.group if ctx else None)
        self.log.info("restore of %s:\n%s", self.job_home, restore_text(result))
        return result.to_dict()


@refusals_name_parameters
class StreamSavepointHousekeepingOperator(JobHomeTask, BaseOperator):
    """Delete old savepoints: keep the newest ``keep_last`` and/or those younger than ``max_age``.

    The newest savepoint is always kept, and so is every savepoint an upgrade in progress may roll back to
    (pinned in the job home). XCom: the ids deleted.

    :param job_home: the job's home directory (path or URL). Templated.
    :param keep_last: keep the newest N (at least 1).
    :param max_age: keep those younger than this ISO 8601 duration, e.g. ``P7D``.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    """

    template_fields: Sequence[str] = ("job_home",)

    def __init__(self, *, job_home: str, keep_last: int | None = None, max_age: str | None = None,
                 storage_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_age_delta = retention(keep_last, max_age)[1]  # refused here, when the DAG is parsed
        self.job_home = job_home
        self.keep_last = keep_last
        self.max_age = max_age
        self.storage_conn_id = storage_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.render.savepoints import prune_text

        home = StreamJobHook(self.job_home, None, self.storage_conn_id).home()
        pruned = prune(home, keep_last=self.keep_last, max_age=self.max_age_delta)
        self.log.info("savepoints of %s: %s", self.job_home, prune_text(pruned))
        return pruned.to_dict()
