"""Wait until the consumer group's committed offsets equal the checkpoint's, per partition (poke or deferred)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.triggers.group_sync import StreamGroupSyncTrigger


class StreamGroupSyncSensor(JobHomeTask, BaseSensorOperator):
    """Succeed once the group and the checkpoint agree on every partition: after a reset, a restore, or before
    handing the group to another tool. The runtime commits each batch after Spark does, so a running job's
    group trails its checkpoint by at most a batch. XCom: whether in sync, and the partitions that were not.

    :param job_home: the job's home directory (path or URL). Templated.
    :param kafka_conn_id: the ``kafka`` connection.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param deferrable: wait in the triggerer (default: Airflow's ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = ("job_home",)

    def __init__(self, *, job_home: str, kafka_conn_id: str = "kafka_default", storage_conn_id: str | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_home = job_home
        self.kafka_conn_id = kafka_conn_id
        self.storage_conn_id = storage_conn_id
        self.deferrable = deferrable

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        self.defer(trigger=StreamGroupSyncTrigger(job_home=self.job_home, kafka_conn_id=self.kafka_conn_id,
                                                  storage_conn_id=self.storage_conn_id,
                                                  poll_seconds=self.poke_interval, timeout_seconds=self.timeout),
                   method_name="execute_complete")

    def poke(self, context: Context) -> PokeReturnValue:
        found = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id).group_sync()
        self.log.info("job %s: %s", self.job_home, "in sync" if found["in_sync"] else "; ".join(found["behind"]))
        if found.get("window_findings"):
            self.log.warning("job %s: the group's window says %s: %s", self.job_home, found["window"],
                             "; ".join(found["window_findings"]))
        return PokeReturnValue(is_done=found["in_sync"], xcom_value=found if found["in_sync"] else None)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != WaitStatus.SUCCESS:
            raise JobStateError(f"job {self.job_home}: {event.get('message')}")
        if event.get("window_findings"):
            self.log.warning("job %s: the group's window says %s: %s", self.job_home, event.get("window"),
                             "; ".join(event["window_findings"]))
        return {key: value for key, value in event.items() if key not in ("status", "message")}
