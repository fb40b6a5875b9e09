"""One hook that gives an operator everything about one streaming job.

Nothing new is stored in Airflow: the Kafka client settings (secrets included)
come from the existing ``kafka`` connection type, read as the Kafka provider
reads it (``hooks/kafka.py``); a job home that is not local takes its storage
credentials from a connection of its own (``hooks/job_home.py``).
The configuration built here carries secrets: it is handed to the operation
API and never logged, pushed to XCom or serialized into a trigger.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.hooks.job_home import JobHomeStorageHook
from airflow_kafka_stream.hooks.kafka import StreamKafkaHook

# Lazy imports: ops.context, ops.health and ops.verify (checkpoint, storage, kafka; 100 ms and more) wait for the
# hook's use: every operator imports this hook while Airflow parses its DAG file.


class StreamJobHook(BaseHook):
    """Kafka client config, storage options, job home and operation context of one job: the ``kafka``
    connection read by :class:`~airflow_kafka_stream.hooks.kafka.StreamKafkaHook` (the Kafka provider's way)
    and the storage connection by :class:`~airflow_kafka_stream.hooks.job_home.JobHomeStorageHook`.

    :param job_home: the job's home directory (a path or an fsspec URL such as ``s3://bucket/jobs/orders``).
    :param kafka_conn_id: the ``kafka`` connection whose extra holds the librdkafka configuration;
        None for operations that need no broker (stop, savepoints).
    :param storage_conn_id: a connection whose extra holds fsspec storage options for the job home;
        None for a local job home or one whose credentials come from the environment.
    """

    conn_name_attr = "kafka_conn_id"
    default_conn_name = "kafka_default"
    hook_name = "Spark streaming job reading Kafka"

    def __init__(self, job_home: str, kafka_conn_id: str | None = default_conn_name,
                 storage_conn_id: str | None = None) -> None:
        super().__init__()
        if not job_home or not str(job_home).strip():
            raise InvalidInputError("job_home is empty; pass the job's home directory (a path or URL)",
                                    setting="job_home")
        self.job_home = str(job_home).strip()
        self.kafka_conn_id = kafka_conn_id
        self.storage_conn_id = storage_conn_id
        self.storage = JobHomeStorageHook(self.job_home, storage_conn_id)

    def _kafka(self) -> StreamKafkaHook:
        if not self.kafka_conn_id:
            raise InvalidInputError("this operation needs Kafka: pass kafka_conn_id (a connection of type kafka)",
                                    setting="kafka_conn_id")
        return StreamKafkaHook(self.kafka_conn_id)

    def kafka_config(self) -> dict[str, Any]:
        """The control plane's librdkafka configuration (secrets included: never log it)."""
        return self._kafka().client_config()

    def driver_kafka_config(self) -> dict[str, Any]:
        """The configuration a launched driver gets in its environment (text only: no callback)."""
        return self._kafka().driver_config()

    def storage_options(self) -> dict[str, Any]:
        """fsspec storage options for the job home (empty for a local home)."""
        return self.storage.storage_options()

    def home(self, require: bool = True):
        """The job home (``storage.jobhome.JobHome``), refused when the directory is not one; with
        ``require=False`` as it is, for a job home a first submit makes or a driver just launched has not
        written yet. Operators, sensors and triggers get the home here, never from storage directly."""
        return self.storage.home(require)

    def status(self) -> dict[str, Any] | None:
        """The job's last status; None before it reported one (a job just submitted may have no home yet)."""
        return self.home(require=False).status()

    def health_look(self, spec: Any, timeout_seconds: float):
        """The upgrade's health gate look (``ops.health.HealthLook`` for ``spec``, a ``core.health.HealthSpec``):
        each call takes a lag sample and judges; it keeps its samples, so the sensor and the trigger each hold
        one for their whole gate."""
        from airflow_kafka_stream.ops.health import HealthLook

        return HealthLook(self.home(require=False), self.kafka_config(), spec, timeout_seconds)

    def group_sync(self) -> dict[str, Any]:
        """One verification (``ops.verify``), reduced to what a wait for the group needs: in sync or not, and
        the partitions that are not."""
        from airflow_kafka_stream.ops.verify import verify

        report = verify(self.context()).to_dict()
        # In sync: equal, or (a running job) at a batch it committed while it was looked at (core/verify.py).
        behind = [f"{p['topic']}:{p['partition']} group {p['group_offset']} checkpoint {p['checkpoint_offset']}"
                  for p in report["partitions"] if not p["group_in_sync"]]
        window = report.get("window") or {}
        return {"in_sync": not behind, "behind": behind, "status": report["status"],
                "partitions": len(report["partitions"]), "window": window.get("status"),
                "window_rule": window.get("rule"), "window_findings": [
                    f"{f['topic']}:{f['partition']} {f['status']} ({f['detail']})" for f in window.get("findings", [])]}

    def context(self, group: str | None = None, checkpoint: str | None = None, sink_path: str | None = None,
                need_kafka: bool = True, sink_kind: str | None = None):
        """The operation context (job home, current checkpoint, Kafka config, group, sink) of the job."""
        from airflow_kafka_stream.ops.context import build_context

        return build_context(
            job_home=self.job_home,
            checkpoint=checkpoint,
            group=group,
            client_config=self.kafka_config() if need_kafka else {},
            storage_options=self.storage_options(),
            sink_path=sink_path,
            sink_kind=sink_kind,
        )

    def test_connection(self) -> tuple[bool, str]:
        """Whether the job home is readable and the brokers answer (the message names what failed)."""
        for hook in (self.storage, *((self._kafka(),) if self.kafka_conn_id else ())):
            ok, message = hook.test_connection()
            if not ok:
                return False, message
        return True, f"job home {self.job_home} is readable" + (" and the Kafka brokers answer"
                                                                 if self.kafka_conn_id else "")
