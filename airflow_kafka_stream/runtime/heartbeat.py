"""The status document and its heartbeat, and fencing a driver that cannot write it.

``<home>/status.json`` is rewritten after every batch and every heartbeat interval; a driver whose
writes fail for two intervals stops its query before the control plane would take it for dead.
A component of :class:`~airflow_kafka_stream.runtime.StreamRuntime`: :class:`Heartbeat` reads the shared
:class:`~airflow_kafka_stream.runtime.run_state.RunState` and writes its state and fence reason.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from airflow_kafka_stream.core.offsets import to_nested
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.runtime.config import utc_now
from airflow_kafka_stream.runtime.run_state import RunState
from airflow_kafka_stream.storage import status as st

log = logging.getLogger(__name__)

#: After this many heartbeat intervals of silence a driver reads the status before it writes anything of the
#: job: no reader takes it for dead sooner (the liveness rule waits four intervals at least).
SUPERSEDE_LOOK_INTERVALS = 2


class Heartbeat:
    """The run's state changes, its status document, the heartbeat thread that writes it, and the fence.

    It owns when the last beat succeeded (what the fence and the metrics measure silence from), the state it
    last wrote and the last beat's timings; everything else it reads from the shared :class:`RunState` or asks
    its collaborators (the group committer, the skipped offsets, the time-lag sampler, the metrics).
    """

    def __init__(self, run: RunState, config, home, *, committer, skipped, time_lag,
                 metrics: Callable[[], Any], generation: Callable[[], int | None],
                 jvm_pid: int | None = None, application_id: str | None = None) -> None:
        self.run = run
        self.config = config
        self.home = home
        self.committer = committer
        self.skipped = skipped
        self.time_lag = time_lag
        self._metrics = metrics  # the JobMetrics or None, read at each status
        self._generation = generation  # the runtime's generation (a standby's read of it waits for the go)
        self._jvm_pid = jvm_pid
        self._application_id = application_id
        self._written_state: str | None = None  # the state the heartbeat last wrote
        self._beat_times = (0.0, 0.0)  # seconds the last status write took to build and to write
        self._last_beat_ok = time.monotonic()
        self._thread: threading.Thread | None = None

    def silence(self) -> float:
        """Seconds since the last status write that succeeded (or since the heartbeat started)."""
        return time.monotonic() - self._last_beat_ok

    def set_state(self, state: str) -> None:
        with self.run.lock:
            self.run.state = state
        self.run.wake_status.set()

    def start(self) -> None:
        """Start the heartbeat thread (the take wrote the first status): silence is measured from now."""
        self._last_beat_ok = time.monotonic()
        self._thread = threading.Thread(target=self._heartbeat_loop, name="status-heartbeat", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the heartbeat thread to end (the run set ``closing``), when it was started."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _heartbeat_loop(self) -> None:
        """Write the status every interval, counted from when the last beat began (not from when it ended), and
        sooner after each batch: the beat's own work never stretches the period the fence is measured against."""
        run = self.run
        interval = self.config.heartbeat_seconds
        while not run.closing.is_set():
            began = time.monotonic()
            next_beat = began + interval
            with run.lock:
                offsets = run.last_offsets
            self.time_lag.poke(offsets)  # measured on its own thread, at most once an interval
            try:
                self.skipped.collect()
            except Exception as exc:  # noqa: BLE001 - its files stay for the next beat; the heartbeat goes on
                log.warning("job %s: could not record the offsets the source skipped: %s", self.config.job_name, exc)
            if not self.still_owner():
                return  # superseded: the status is another driver's now
            try:
                with run.lock:
                    beat = run.state == self._written_state  # a state change is written durably
                self._written_state = self.write_status(beat=beat)
                self._last_beat_ok = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a storage hiccup must not kill the heartbeat
                silent = time.monotonic() - self._last_beat_ok
                log.warning("writing the status of job %s failed (no heartbeat for %.1fs): %s",
                            self.config.job_name, silent, exc)
                if silent >= st.FENCE_AFTER_INTERVALS * interval:
                    self.fence(silent, f"{type(exc).__name__}: {exc}")
                    return
                next_beat = time.monotonic() + interval / 4  # retry sooner: the fence deadline is near
            took = time.monotonic() - began
            if took > interval / 2:
                build, write = self._beat_times
                log.warning("job %s: a heartbeat took %.1fs of its %.0fs interval (building the status %.1fs, writing "
                            "it %.1fs: this host or the status store is slow); the driver fences itself after %.0fs "
                            "without one", self.config.job_name, took, interval, build, write,
                            st.FENCE_AFTER_INTERVALS * interval)
            run.wake_status.wait(max(0.0, next_beat - time.monotonic()))
            run.wake_status.clear()

    def still_owner(self) -> bool:
        """Whether this driver still holds the job. After a silence long enough for another to judge it dead (a
        frozen process, a host cut off from the job home), it reads the status first: one written by another
        driver (a hot standby that took over, a restart) fences this one for good (:meth:`supersede`). Cheap
        otherwise: nothing is read while the heartbeat is fresh."""
        if self.run.superseded:
            return False
        if self.silence() < SUPERSEDE_LOOK_INTERVALS * self.config.heartbeat_seconds:
            return True
        holder = self._other_holder()
        if holder is None:
            return True
        self.supersede(holder)
        return False

    def _other_holder(self) -> str | None:
        """Another driver named by the job's status (pid, host, start), None when it names this one or cannot be
        read (then the storage fence decides)."""
        try:
            found = StatusDocument.parse(st.read_status(self.home.url, self.config.storage_options))
        except Exception as exc:  # noqa: BLE001 - unreadable: the fence for a silent heartbeat takes over
            log.warning("job %s: could not read the status to check who holds the job: %s", self.config.job_name, exc)
            return None
        if found is None or (found.pid, found.host) == (os.getpid(), socket.gethostname()):
            return None
        return f"pid {found.pid} on {found.host}, state {found.state_text}, heartbeat {found.heartbeat_text}"

    def supersede(self, holder: str) -> None:
        """Another driver holds the job: stop the query and write nothing more of the job (its status, group,
        checkpoint and output are the other driver's now)."""
        silent = self.silence()
        self.run.superseded = True
        self.run.fence_reason = (
            f"fenced: another driver holds the job ({holder}); this driver was silent for {silent:.1f}s (frozen, "
            "or cut off from the job home) and was taken for dead. It stopped its query and wrote nothing more")
        log.error("job %s %s", self.config.job_name, self.run.fence_reason)
        self._stop_query()

    def fence(self, silent: float, cause: str) -> None:
        """Stop processing: a driver that cannot prove it is alive will soon look dead to the control plane,
        which then lets a reset or restore touch the checkpoint under it."""
        self.run.fence_reason = (
            f"fenced: the driver could not write its heartbeat ({self.home.url}/status.json) for {silent:.1f}s "
            f"({cause}); it stopped its query before the control plane would take it for "
            "dead. The running batch, if any, is re-run on restart. Fix the storage and start the job again"
        )
        log.error("job %s %s", self.config.job_name, self.run.fence_reason)
        self._stop_query()

    def _stop_query(self) -> None:
        query = self.run.query
        if query is not None:
            try:
                query.stop()
            except Exception as stop_exc:  # noqa: BLE001 - the supervisor stops it again and reports
                log.error("job %s: stopping the fenced query failed: %s", self.config.job_name, stop_exc)

    def status(self) -> dict[str, Any]:
        """The status document as it would be written now.

        It asks the JVM nothing (the ids were read when the query started): a py4j call waits for a busy or
        collecting JVM, and the heartbeat must not wait with it."""
        run = self.run
        with run.lock:
            doc = {
                "job": self.config.job_name,
                "state": run.state,
                "application_id": self._application_id,
                "query_id": run.query_ids[0],
                "run_id": run.query_ids[1],
                "generation": self._generation(),
                "checkpoint": run.checkpoint_location,
                "group": self.config.group_id,
                "last_batch_id": run.last_batch_id,
                "last_offsets": to_nested(run.last_offsets) if run.last_offsets else None,
                "batches_this_run": run.batches,
                "records_this_run": run.records,
                "dead_letters": run.dead_letters,
                "read_placement": run.read_placement,
                "lag_samples": list(run.lag_samples),
                "heartbeat_interval_seconds": self.config.heartbeat_seconds,
                "clock_skew_seconds": self.config.clock_skew_seconds,
                "pid": os.getpid(),
                "jvm_pid": self._jvm_pid,
                "host": socket.gethostname(),
                "started_at": run.started_at.isoformat(),
                "stopped_at": run.stopped_at.isoformat() if run.stopped_at else None,
                "stop_requested_at": run.stop_requested_at,
                "stop_requested_by": run.stop_requested_by,
                "drain_overdue": run.drain_overdue,
                "note": run.note,
                "error": run.error,
            }
        metrics = self._metrics()
        doc["group_commits"] = self.committer.stats()
        doc["skipped_offsets"] = self.skipped.document()
        doc["metrics"] = metrics.status_field() if metrics is not None else None
        doc["time_lag"] = self.time_lag.document()
        doc["time_lag_samples"] = self.time_lag.samples()
        for name, part in list(run.status_parts.items()):
            doc[name] = part()
        now = utc_now()  # stamped last: the heartbeat says when the document was complete
        doc["heartbeat"], doc["heartbeat_epoch"] = now.isoformat(), now.timestamp()
        return doc

    def keep_query(self, query) -> None:
        """Keep the running query and its ids (read once: the status must not ask the JVM at every beat)."""
        self.run.query = query
        self.run.query_ids = (str(query.id), str(query.runId))

    def write_status(self, *, beat: bool = False) -> str:
        """Write the status: durably, except the periodic beats (see :func:`~airflow_kafka_stream.storage.status.
        write_status`), whose build and write times are kept for the slow-beat warning. A superseded driver
        writes nothing."""
        if self.run.superseded:
            return self.run.state
        return self._write_status(beat=beat)

    def _write_status(self, *, beat: bool = False) -> str:
        """The write itself, timed."""
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
