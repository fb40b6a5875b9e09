"""Offsets the source skipped under ``failOnDataLoss=false``: into the job's history, counted in its status.

The source (on the driver, or a task reading a batch) writes one ``control/skipped-*.json`` per skipped range
(``source.control_files.record_skipped``); the heartbeat hands them to :meth:`SkippedOffsets.collect`, which
appends a ``data_loss_skipped`` record to the history, counts the offsets for the status and the metrics, and
removes the file. The job went on reading, as the user asked; the record says what it did not read.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from airflow_kafka_stream.source.control_files import SKIPPED_PREFIX
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)


class SkippedOffsets:
    """What the job skipped in this run, read from the source's files in the job home's control folder."""

    def __init__(self, home: JobHome, job_name: str) -> None:
        self._home = home
        self._job_name = job_name
        self._lock = threading.Lock()
        self.offsets = 0
        self.ranges = 0
        self.last: dict[str, Any] | None = None

    def collect(self) -> int:
        """Move every skipped range the source reported into the history; the number moved."""
        fs = self._home.fs
        pattern = f"{self._home.p(*layout.CONTROL)}/{SKIPPED_PREFIX}*.json"
        moved = 0
        for path in sorted(fs.glob(pattern)):
            skipped = json.loads(fs.cat_file(path))
            count = max(0, int(skipped["resume_at"]) - int(skipped["first"]))
            self._home.append_history({
                "operation": "data_loss_skipped", "by": f"driver of {self._job_name}", "started_at": skipped["at"],
                "args": {"partition": skipped["partition"]},
                "after": {"first": skipped["first"], "resumed_at": skipped["resume_at"], "offsets": count,
                          "reason": skipped["reason"]},
                "result": "ok",
            })
            fs.rm(path)
            with self._lock:
                self.offsets += count
                self.ranges += 1
                self.last = skipped
            log.warning("job %s: failOnDataLoss=false skipped %d offsets of %s (%s..%s): %s; recorded in the history",
                        self._job_name, count, skipped["partition"], skipped["first"], skipped["resume_at"],
                        skipped["reason"])
            moved += 1
        return moved

    def document(self) -> dict[str, Any]:
        """The status's ``skipped_offsets``: how many offsets and ranges this run skipped, and the newest range."""
        with self._lock:
            return {"offsets": self.offsets, "ranges": self.ranges, "last": self.last}
