"""A checkpoint generation the control plane created but no query has started on yet.

``restore --drop-state`` and ``reset --drop-state`` create an empty generation
seeded with start offsets (``generations/NNNN.json``); Spark writes the
checkpoint's ``metadata`` only when the job starts on it. Until then the
generation is fit to start from and its position is those start offsets: the
checks that read a checkpoint say so instead of calling it damaged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.checkpoint.atomic import exists_file, list_names, open_fs
from airflow_kafka_stream.core.checkpoint_log import METADATA
from airflow_kafka_stream.core.offsets import PartitionOffsets, parse_offsets_json
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.storage.jobhome import GENERATION_WIDTH, JobHome


@dataclass(frozen=True)
class UnstartedGeneration:
    """The current generation of a job home, empty, with where the job will start on it."""

    generation: int
    checkpoint_url: str
    reason: str | None
    start_offsets: dict[str, Any] | str | None
    from_savepoint: str | None

    @property
    def record(self) -> str:
        return f"generations/{self.generation:0{GENERATION_WIDTH}d}.json"

    def describe(self) -> str:
        origin = self.reason or "unknown"
        if self.from_savepoint:
            origin += f" from savepoint {self.from_savepoint}"
        start = json.dumps(self.start_offsets, separators=(",", ":"), sort_keys=True) \
            if isinstance(self.start_offsets, dict) else repr(self.start_offsets or "the job's startingOffsets")
        return (f"generation {self.generation} ({origin}) has not started yet: no query has run on "
                f"{self.checkpoint_url}; the job starts at {start} ({self.record})")

    def offsets(self) -> PartitionOffsets:
        """The seeded start offsets per partition; JobStateError when the start is only a rule (earliest...)."""
        if not isinstance(self.start_offsets, dict):
            raise JobStateError(
                f"{self.describe()}; the start offsets are resolved by Kafka only when the job starts, so there is "
                "nothing to compare yet: start the job, then verify"
            )
        return parse_offsets_json(self.start_offsets)

    def refusal(self, operation: str) -> JobStateError:
        return JobStateError(
            f"{self.describe()}. {operation} needs a committed batch, and there is none yet: start the job (it "
            "starts at those offsets), stop it gracefully, then try again"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint_url, "generation": self.generation, "started": False,
                "reason": self.reason, "from_savepoint": self.from_savepoint, "start_offsets": self.start_offsets,
                "batch_id": None}


def unstarted_generation(home: JobHome | None, checkpoint_url: str) -> UnstartedGeneration | None:
    """The home's current generation when ``checkpoint_url`` is it and it is still empty, else None.

    Only an empty directory counts: one with files but no ``metadata`` is damaged, and fsck says so.
    """
    if home is None:
        return None
    generation = home.current_generation()
    if generation is None or home.checkpoint_url(generation).rstrip("/") != checkpoint_url.rstrip("/"):
        return None
    fs, root = open_fs(checkpoint_url, home.storage_options)
    fs.invalidate_cache()
    if exists_file(fs, f"{root}/{METADATA}") or (fs.exists(root) and list_names(fs, root)):
        return None
    info = home.generation_info(generation) or {}
    return UnstartedGeneration(generation, checkpoint_url, info.get("reason"), info.get("start_offsets"),
                               info.get("from_savepoint"))
