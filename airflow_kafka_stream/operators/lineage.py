"""OpenLineage facets of the tasks that start or change a job: its topics in, its sink out, its identity.

Airflow's OpenLineage provider asks an operator for ``get_openlineage_facets_on_start`` and
``..._on_complete`` around ``execute``; :class:`JobLineage` answers for submit, the upgrade's tasks, restore,
reset and stop. What it reports is read from the job home's job.json (what the running driver declared), else
from what the task was given (``topics``, ``output_path``, the ``kafka`` connection's bootstrap servers): a first
submit's start has no job.json yet. The run facet ``streamingJob`` names the OpenLineage job the driver reports
under, so a catalog can join the task's run to the streaming job's. Lineage never fails a task: a problem
building it is logged at warning and the task reports no lineage (docs/lineage.md).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from airflow_kafka_stream.core.lineage import (
    DEFAULT_NAMESPACE,
    FACET_SCHEMA_PREFIX,
    NAMESPACE_ENV,
    PRODUCER,
    facet_schema,
    job_datasets,
)
from airflow_kafka_stream.hooks.stream_job import StreamJobHook

# Lazy imports: the OpenLineage provider and client (OperatorLineage, the facet classes) are loaded when the
# provider asks for lineage during a task, not when a DAG file using the operators is parsed.

STREAMING_JOB_SCHEMA_URL = f"{FACET_SCHEMA_PREFIX}StreamingJobRunFacet:1-0-0"
STREAMING_JOB_SCHEMA = facet_schema({"namespace": {"type": "string"}, "name": {"type": "string"},
                                     "jobHome": {"type": "string"}, "appVersion": {"type": ["string", "null"]}},
                                    ["namespace", "name", "jobHome"])


@functools.cache
def _facet_class() -> type:
    import attr
    from openlineage.client.facet_v2 import RunFacet

    @attr.define
    class StreamingJobRunFacet(RunFacet):
        """The streaming job (its OpenLineage namespace and name) a task started or changed, and its job home."""

        namespace: str
        name: str
        jobHome: str  # noqa: N815 - the spec's camelCase
        appVersion: str | None = None  # noqa: N815

        @staticmethod
        def _get_schema() -> str:
            return STREAMING_JOB_SCHEMA_URL

    return StreamingJobRunFacet


def job_namespace() -> str:
    """The namespace the driver reports its job in: Airflow's ``[openlineage] namespace`` (what it passes on)."""
    from airflow.providers.openlineage import conf as ol_conf

    return ol_conf.namespace() or os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


class JobLineage:
    """Mixin for an operator with ``job_home`` (and maybe ``topics``, ``output_path``, ``kafka_conn_id``)."""

    def get_openlineage_facets_on_start(self) -> Any:
        return self._job_lineage()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:  # noqa: ARG002 - the provider's API
        return self._job_lineage()

    def _job_lineage(self) -> Any:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage

        try:
            hook = StreamJobHook(self.job_home, getattr(self, "kafka_conn_id", None),
                                 getattr(self, "storage_conn_id", None))
            spec = hook.home(require=False).spec()
            servers = None
            if not (spec.get("kafka") or {}).get("bootstrap.servers") and hook.kafka_conn_id:
                servers = hook.kafka_config().get("bootstrap.servers")
            topics = getattr(self, "topics", None) or []
            inputs, outputs = job_datasets(spec, [topics] if isinstance(topics, str) else list(topics),
                                           getattr(self, "output_path", None) or getattr(self, "sink_path", None),
                                           servers)
            name = spec.get("job") or str(self.job_home).rstrip("/").rsplit("/", 1)[-1]
            version = spec.get("version") or getattr(self, "app_version", None)
            facet = _facet_class()(namespace=job_namespace(), name=name, jobHome=str(self.job_home),
                                   appVersion=str(version) if version else None, producer=PRODUCER)
            return OperatorLineage(inputs=[Dataset(namespace=d.namespace, name=d.name) for d in inputs],
                                   outputs=[Dataset(namespace=d.namespace, name=d.name) for d in outputs],
                                   run_facets={"streamingJob": facet})
        except Exception as exc:  # noqa: BLE001 - lineage never fails a task
            self.log.warning("no OpenLineage facets for job %s: %s: %s", getattr(self, "job_home", "?"),
                             type(exc).__name__, exc)
            return OperatorLineage()
