"""One hook that gives an operator everything about one streaming job.

Nothing new is stored in Airflow: the Kafka client settings (secrets included)
come from the existing ``kafka`` connection type, whose extra holds the
librdkafka configuration; a job home that is not local takes its storage
credentials from a connection whose extra holds fsspec storage options
(login and password, when set, fill ``key`` and ``secret`` as s3fs names them).
The configuration built here carries secrets: it is handed to the operation
API and never logged, pushed to XCom or serialized into a trigger.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_stream.errors import InvalidInputError

#: confluent-kafka options whose values are callables; a connection extra holds text only.
CALLBACK_KEYS = ("error_cb", "throttle_cb", "stats_cb", "log_cb", "oauth_cb", "on_commit")


class StreamJobHook(BaseHook):
    """Kafka client config, storage options, job home and operation context of one job.

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
            raise InvalidInputError("job_home is empty; pass the job's home directory (a path or URL)")
        self.job_home = str(job_home).strip()
        self.kafka_conn_id = kafka_conn_id
        self.storage_conn_id = storage_conn_id

    def kafka_config(self) -> dict[str, Any]:
        """The librdkafka configuration of the Kafka connection (secrets included: never log it)."""
        if not self.kafka_conn_id:
            raise InvalidInputError("this operation needs Kafka: pass kafka_conn_id (a connection of type kafka)")
        extra = self.get_connection(self.kafka_conn_id).extra_dejson
        if not isinstance(extra, dict) or not extra.get("bootstrap.servers"):
            raise InvalidInputError(
                f"connection {self.kafka_conn_id!r} has no 'bootstrap.servers' in its extra; set its extra to the "
                'librdkafka configuration, e.g. {"bootstrap.servers": "broker:9092"}'
            )
        callbacks = sorted(key for key in CALLBACK_KEYS if key in extra)
        if callbacks:
            raise InvalidInputError(
                f"connection {self.kafka_conn_id!r} sets {', '.join(callbacks)}: callbacks cannot reach a Spark "
                "driver or the control plane from a connection; remove them"
            )
        # group.id belongs to the job (job.json), not to a connection shared by several jobs.
        return {key: value for key, value in extra.items() if key != "group.id"}

    def storage_options(self) -> dict[str, Any]:
        """fsspec storage options for the job home (empty for a local home)."""
        if not self.storage_conn_id:
            return {}
        conn = self.get_connection(self.storage_conn_id)
        options = dict(conn.extra_dejson or {})
        if conn.login and "key" not in options:
            options["key"] = conn.login
        if conn.password and "secret" not in options:
            options["secret"] = conn.password
        return options

    def home(self, require: bool = True):
        """The job home (``storage.jobhome.JobHome``), refused when the directory is not one; with
        ``require=False`` as it is, for a job home a first submit makes or a driver just launched has not
        written yet. Operators, sensors and triggers get the home here, never from storage directly."""
        from airflow_kafka_stream.storage.jobhome import JobHome

        home = JobHome(self.job_home, self.storage_options())
        if require:
            home.require()
        return home

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
        return {"in_sync": not behind, "behind": behind, "status": report["status"],
                "partitions": len(report["partitions"])}

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
        from airflow_kafka_stream.errors import StreamError
        from airflow_kafka_stream.kafka.metadata import list_topic_partitions

        try:
            self.home()
            if self.kafka_conn_id:
                list_topic_partitions(self.kafka_config(), timeout=10)
        except StreamError as exc:
            return False, str(exc)
        return True, f"job home {self.job_home} is readable and the Kafka brokers answer"
