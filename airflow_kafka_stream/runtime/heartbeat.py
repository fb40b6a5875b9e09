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
        """Write the status every interval, counted from when the last beat began (not from when it ended), and
        sooner after each batch: the beat's own work never stretches the period the fence is measured against."""
        interval = self.config.heartbeat_seconds
        while not self._closing.is_set():
            began = time.monotonic()
            next_beat = began + interval
            with self._lock:
                offsets = self._last_offsets
            self.time_lag.poke(offsets)  # measured on its own thread, at most once an interval
            try:
                self.skipped.collect()
            except Exception as exc:  # noqa: BLE001 - its files stay for the next beat; the heartbeat goes on
                log.warning("job %s: could not record the offsets the source skipped: %s", self.config.job_name, exc)
            try:
                with self._lock:
                    beat = self._state == self._written_state  # a state change is written durably
                self._written_state = self._write_status(beat=beat)
                self._last_beat_ok = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a storage hiccup must not kill the heartbeat
                silent = time.monotonic() - self._last_beat_ok
                log.warning("writing the status of job %s failed (no heartbeat for %.1fs): %s",
                            self.config.job_name, silent, exc)
                if silent >= st.FENCE_AFTER_INTERVALS * interval:
                    self._fence(silent, f"{type(exc).__name__}: {exc}")
                    return
                next_beat = time.monotonic() + interval / 4  # retry sooner: the fence deadline is near
            took = time.monotonic() - began
            if took > interval / 2:
                build, write = self._beat_times
                log.warning("job %s: a heartbeat took %.1fs of its %.0fs interval (building the status %.1fs, writing "
                            "it %.1fs: this host or the status store is slow); the driver fences itself after %.0fs "
                            "without one", self.config.job_name, took, interval, build, write,
                            st.FENCE_AFTER_INTERVALS * interval)
            self._wake_status.wait(max(0.0, next_beat - time.monotonic()))
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
        """The status document as it would be written now.

        It asks the JVM nothing (the ids were read when the query started): a py4j call waits for a busy or
        collecting JVM, and the heartbeat must not wait with it."""
        with self._lock:
            doc = {
                "job": self.config.job_name,
                "state": self._state,
                "application_id": self._application_id,
                "query_id": self._query_ids[0],
                "run_id": self._query_ids[1],
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
        now = utc_now()  # stamped last: the heartbeat says when the document was complete
        doc["heartbeat"], doc["heartbeat_epoch"] = now.isoformat(), now.timestamp()
        return doc

    def _keep_query(self, query) -> None:
        """Keep the running query and its ids (read once: the status must not ask the JVM at every beat)."""
        self._query = query
        self._query_ids = (str(query.id), str(query.runId))

    def _write_status(self, *, beat: bool = False) -> str:
        """Write the status: durably, except the periodic beats (see :func:`~airflow_kafka_stream.storage.status.
        write_status`), whose build and write times are kept for the slow-beat warning."""
        began = time.monotonic()
        document = self.status()
        built = time.monotonic()
        st.write_status(self.home.url, document, self.config.storage_options, durable=not beat)
        self._beat_times = (built - began, time.monotonic() - built)
        return document["state"]

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
