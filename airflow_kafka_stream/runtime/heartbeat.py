"""The status document and its heartbeat, and fencing a driver that cannot write it.

``<home>/status.json`` is rewritten after every batch and every heartbeat interval; a driver whose
writes fail for two intervals stops its query before the control plane would take it for dead.
Part of :class:`~airflow_kafka_stream.runtime.StreamRuntime`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from airflow_kafka_stream.core.offsets import to_nested
from airflow_kafka_stream.runtime.config import utc_now
from airflow_kafka_stream.storage import status as st

log = logging.getLogger(__name__)


class Heartbeat:
    """StreamRuntime's state changes, status document, heartbeat thread and fence."""

    def _set_state(self, state: str) -> None:
        with self._lock:
            self._state = state
        self._wake_status.set()

    def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_seconds
        while not self._closing.is_set():
            wait = interval
            with self._lock:
                offsets = self._last_offsets
            self.time_lag.poke(offsets)  # measured on its own thread, at most once an interval
            try:
                self.skipped.collect()
            except Exception as exc:  # noqa: BLE001 - its files stay for the next beat; the heartbeat goes on
                log.warning("job %s: could not record the offsets the source skipped: %s", self.config.job_name, exc)
            try:
                self._write_status()
                self._last_beat_ok = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a storage hiccup must not kill the heartbeat
                silent = time.monotonic() - self._last_beat_ok
                log.warning("writing the status of job %s failed (no heartbeat for %.1fs): %s",
                            self.config.job_name, silent, exc)
                if silent >= st.FENCE_AFTER_INTERVALS * interval:
                    self._fence(silent, f"{type(exc).__name__}: {exc}")
                    return
                wait = interval / 4  # retry sooner: the fence deadline is near
            self._wake_status.wait(wait)
            self._wake_status.clear()

    def _fence(self, silent: float, cause: str) -> None:
        """Stop processing: a driver that cannot prove it is alive will soon look dead to the control plane,
        which then lets a reset or restore touch the checkpoint under it."""
        self._fence_reason = (
            f"fenced: the driver could not write its heartbeat ({self.home.url}/status.json) for {silent:.1f}s "
            f"({cause}); it stopped its query before the control plane would take it for "
            "dead. The running batch, if any, is re-run on restart. Fix the storage and start the job again"
        )
        log.error("job %s %s", self.config.job_name, self._fence_reason)
        query = self._query
        if query is not None:
            try:
                query.stop()
            except Exception as stop_exc:  # noqa: BLE001 - the supervisor stops it again and reports
                log.error("job %s: stopping the fenced query failed: %s", self.config.job_name, stop_exc)

    def status(self) -> dict[str, Any]:
        """The status document as it would be written now."""
        now = utc_now()
        query = self._query
        with self._lock:
            doc = {
                "job": self.config.job_name,
                "state": self._state,
                "application_id": application_id(self.spark),
                "query_id": str(query.id) if query is not None else None,
                "run_id": str(query.runId) if query is not None else None,
                "generation": self.generation,
                "checkpoint": self.checkpoint_location,
                "group": self.config.group_id,
                "last_batch_id": self._last_batch_id,
                "last_offsets": to_nested(self._last_offsets) if self._last_offsets else None,
                "batches_this_run": self._batches,
                "records_this_run": self._records,
                "dead_letters": self._dead_letters,
                "read_placement": self._read_placement,
                "lag_samples": list(self._lag_samples),
                "heartbeat": now.isoformat(),
                "heartbeat_epoch": now.timestamp(),
                "heartbeat_interval_seconds": self.config.heartbeat_seconds,
                "clock_skew_seconds": self.config.clock_skew_seconds,
                "pid": os.getpid(),
                "jvm_pid": self._jvm_pid,
                "host": socket.gethostname(),
                "started_at": self._started_at.isoformat(),
                "stopped_at": self._stopped_at.isoformat() if self._stopped_at else None,
                "stop_requested_at": self._stop_requested_at,
                "stop_requested_by": self._stop_requested_by,
                "drain_overdue": self._drain_overdue,
                "note": self._note,
                "error": self._error,
            }
        doc["group_commits"] = self.committer.stats()
        doc["skipped_offsets"] = self.skipped.document()
        doc["metrics"] = self.metrics.status_field() if self.metrics is not None else None
        doc["time_lag"] = self.time_lag.document()
        doc["time_lag_samples"] = self.time_lag.samples()
        return doc

    def _write_status(self) -> None:
        st.write_status(self.home.url, self.status(), self.config.storage_options)

def jvm_pid(spark) -> int | None:
    """The pid of the driver's JVM (the process that writes the checkpoint), when Spark runs one here."""
    try:
        return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no JVM of their own
        return None


def application_id(spark) -> str | None:
    try:
        return spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no SparkContext
        return None
