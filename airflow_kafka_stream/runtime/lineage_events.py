"""A driver's OpenLineage run events, built with the OpenLineage client's classes from ``core.lineage`` values.

Imported only when the client is configured (``runtime/lineage.py``). Besides the spec's own facets (job type
``STREAMING``, parent run, processing engine, error message) each input carries the job's position in it,
``kafkaStreamPosition``: the next offset of every partition after the newest batch, and that batch's id. Its
JSON schema is ``POSITION_SCHEMA`` (docs/lineage.md shows it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    InputDatasetFacet,
    RunFacet,
    error_message_run,
    job_type_job,
    parent_run,
    processing_engine_run,
)

from airflow_kafka_stream.core.lineage import FACET_SCHEMA_PREFIX, PRODUCER, DatasetId, ParentRun, facet_schema

POSITION_SCHEMA_URL = f"{FACET_SCHEMA_PREFIX}KafkaStreamPositionInputDatasetFacet:1-0-0"
#: The position facet's schema, for a consumer (and the tests) to validate against.
POSITION_SCHEMA = facet_schema({
    "partitions": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                   "description": "partition number -> the next offset the job reads"},
    "batchId": {"type": ["integer", "null"], "description": "the newest batch the offsets are after"},
}, ["partitions"])


@attr.define
class KafkaStreamPositionInputDatasetFacet(InputDatasetFacet):
    """Where the job stands in one topic: the next offset of each partition, after batch ``batchId``."""

    partitions: dict[str, int] = attr.field(factory=dict)
    batchId: int | None = attr.field(default=None)  # noqa: N815 - the spec's camelCase

    @staticmethod
    def _get_schema() -> str:
        return POSITION_SCHEMA_URL


@dataclass(frozen=True)
class JobIdentity:
    """The one OpenLineage job a streaming job is, and what every one of its driver's events says of it."""

    namespace: str
    name: str
    parent: ParentRun | None = None
    spark_version: str | None = None
    package_version: str = "0.1.0"


def run_event(event_type: str, run_id: str, job: JobIdentity, inputs: list[DatasetId], outputs: list[DatasetId],
              positions: Mapping[str, Mapping[str, int]] | None = None, batch_id: int | None = None,
              error: str | None = None) -> RunEvent:
    """One event of a driver's run; ``positions`` are ``core.lineage.offset_positions``'s."""
    facets: dict[str, RunFacet] = {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=job.spark_version or "unknown", name="spark", openlineageAdapterVersion=job.package_version,
            producer=PRODUCER),
    }
    if job.parent is not None:
        facets["parent"] = _parent_facet(job.parent)
    if error is not None:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=error, programmingLanguage="python",
                                                                        producer=PRODUCER)
    job_facets = {"jobType": job_type_job.JobTypeJobFacet(processingType="STREAMING", integration="SPARK",
                                                          jobType="STREAMING_QUERY", producer=PRODUCER)}
    return RunEvent(
        eventType=RunState(event_type), eventTime=datetime.now(UTC).isoformat(), producer=PRODUCER,
        run=Run(runId=run_id, facets=facets), job=Job(namespace=job.namespace, name=job.name, facets=job_facets),
        inputs=[_input(d, (positions or {}).get(d.name), batch_id) for d in inputs],
        outputs=[OutputDataset(namespace=d.namespace, name=d.name) for d in outputs])


def _input(dataset: DatasetId, partitions: Mapping[str, int] | None, batch_id: int | None) -> InputDataset:
    facets = ({"kafkaStreamPosition": KafkaStreamPositionInputDatasetFacet(
        partitions=dict(partitions), batchId=batch_id, producer=PRODUCER)} if partitions is not None else {})
    return InputDataset(namespace=dataset.namespace, name=dataset.name, inputFacets=facets)


def _parent_facet(parent: ParentRun) -> parent_run.ParentRunFacet:
    root = parent.root
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent.run_id), job=parent_run.Job(namespace=parent.namespace, name=parent.name),
        root=parent_run.Root(run=parent_run.RootRun(runId=root.run_id),
                             job=parent_run.RootJob(namespace=root.namespace, name=root.name)) if root else None,
        producer=PRODUCER)
