"""Supervising a running query: stop requests, the drain, an immediate stop, and the checkpoint as truth.

The loop watches the query, the fence, SIGTERM and ``control/stop``: a request drains the query (the
source plans nothing new, the running batch commits; drained once the source says so or Spark is found
between triggers with nothing in flight), a withdrawn one returns to RUNNING, a kill
request or a second SIGTERM stops at once. A component of :class:`~airflow_kafka_stream.runtime.StreamRuntime`:
it reads and writes the shared :class:`~airflow_kafka_stream.runtime.run_state.RunState`, changes the state and
fences through the :class:`~airflow_kafka_stream.runtime.heartbeat.Heartbeat`, and records a batch found in the
checkpoint through the ``record_batch`` it is given.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from pyspark.errors import StreamingQueryException

from airflow_kafka_stream.checkpoint.planned_batch import withdraw_planned_batch
from airflow_kafka_stream.checkpoint.reader import CheckpointPosition, read_started_position
from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.offsets import to_nested
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.runtime.config import utc_now
from airflow_kafka_stream.runtime.heartbeat import Heartbeat
from airflow_kafka_stream.runtime.progress import offsets_equal
from airflow_kafka_stream.runtime.run_state import RunState
from airflow_kafka_stream.storage import status as st
from airflow_kafka_stream.storage.jobhome import STOP_MODE_KILL

log = logging.getLogger(__name__)

#: How long the end of a run waits for progress events of batches the checkpoint already holds:
#: they carry the batches' record counts; past it, the batch is recorded from the checkpoint.
PROGRESS_GRACE_SECONDS = 2.0
#: How often a draining query looks for the source's "drained" answer (a small read; a drain lasts a second or so).
DRAIN_POLL_SECONDS = 0.05


class BatchHeld(RuntimeError):
    """Raised in the job's batch function for a batch planned once a drain had begun: it must not run."""


class Supervision:
    """The watch over the run's query until it ends, and the drain's bookkeeping.

    It owns SIGTERM's count, the last stop request read and the one-time warning of :meth:`_between_batches`.
    """

    def __init__(self, run: RunState, config, home, heartbeat: Heartbeat,
                 record_batch: Callable[..., None]) -> None:
        self.run = run
        self.config = config
        self.home = home
        self.heartbeat = heartbeat
        #: ``record_batch(batch_id, offsets, records=, counted=)``: the runtime's bookkeeping of a committed batch.
        self._record_batch = record_batch
        self._signalled = 0
        self._last_request: dict[str, Any] | None = None
        self._between_batches_failed = False  # warned once that the drain could not read the checkpoint
        #: A drain is under way: the batch gate (:meth:`gate`) holds any batch that reaches it.
        self.draining = False
        #: The batch the gate held (the query then ends), and the newest batch it let run.
        self.held_batch: int | None = None
        self.entered_batch: int | None = None
        #: The checkpoint's batch in flight when this run began (another run's: never withdrawn).
        self.in_flight_at_start: int | None = None

    def require_owner(self) -> None:
        """Raise when another driver took the job while this one was silent (``Heartbeat.still_owner``): a batch
        of a resumed driver must write nothing of the job."""
        if not self.heartbeat.still_owner():
            raise JobStateError(self.run.fence_reason or "fenced: another driver holds the job")

    def gate(self, batch_id: int) -> None:
        """Called by the job's batch function before it runs batch ``batch_id`` (``StreamRuntime.foreach_batch``).

        Once a drain has begun, a batch reaching its function was planned after the request: the source went on
        planning (Spark's connector cannot be told not to). It is held before anything of it is written: this
        raises, the query ends, and the drain withdraws the batch from the checkpoint. So the drain ends after
        the batch that was running, whatever the source.
        """
        self.require_owner()
        if self.draining:
            self.held_batch = batch_id
            raise BatchHeld(f"batch {batch_id} was planned after the stop request; it is held before it runs and "
                            "planned again at the next start")
        self.entered_batch = batch_id

    def supervise(self) -> bool:
        """Watch the query and the stop request; True when it stopped because it was asked to."""
        run = self.run
        query = run.query
        draining_since: float | None = None
        self.in_flight_at_start = self._in_flight_now()
        while query.isActive:
            silent = self.heartbeat.silence()
            if not self.heartbeat.still_owner():
                pass  # superseded: fenced with the reason, below
            elif run.fence_reason is None and silent >= st.FENCE_AFTER_INTERVALS * self.config.heartbeat_seconds:
                self.heartbeat.fence(silent, "the status write has not returned")  # a hung write fails nothing
            if run.fence_reason is not None:
                query.stop()  # usually done already by the heartbeat thread
                raise JobStateError(run.fence_reason)
            if self._signalled > 1:
                self._stop_now("a second SIGTERM")
                return True
            request = self._stop_request()
            if request is not None and request.get("mode") == STOP_MODE_KILL:
                self._stop_now(f"a kill request by {request.get('by') or 'unknown'}")
                return True
            if draining_since is None and request is not None:
                draining_since = time.monotonic()
                self.draining = True
                self.heartbeat.set_state(JobState.DRAINING)
                log.info("job %s: stop requested by %s, draining", self.config.job_name, run.stop_requested_by)
            elif draining_since is not None and request is None:
                draining_since = None
                self.draining = False
                self._withdrawn()
            if draining_since is not None:
                by_answer = self._drained()  # the source's answer: it plans nothing more, no batch can follow
                if by_answer or self._between_batches():
                    log.info("job %s: drained %.2fs after the stop request was seen", self.config.job_name,
                             time.monotonic() - draining_since)
                    query.stop()
                    if not by_answer:  # a trigger may have begun planning between the look and the stop
                        self._withdraw_unrun_batch()
                    return True
                self._check_drain_overdue(draining_since)
            # Draining, the source's answer is looked for often: each look's delay is an upgrade's downtime.
            poll = min(self.config.stop_poll_seconds, DRAIN_POLL_SECONDS) if draining_since is not None else (
                self.config.stop_poll_seconds)
            try:  # returns as soon as the query ends, so an availableNow job exits without a poll's delay
                query.awaitTermination(poll)
            except StreamingQueryException:
                pass  # the query failed: reported below from query.exception()
        if run.fence_reason is not None:
            raise JobStateError(run.fence_reason)
        if self.held_batch is not None:
            log.info("job %s: drained %.2fs after the stop request was seen; batch %s, planned after it, was held "
                     "before it ran", self.config.job_name, time.monotonic() - (draining_since or time.monotonic()),
                     self.held_batch)
            self._withdraw_unrun_batch()
            return True
        exc = query.exception()
        if exc is not None:
            raise RuntimeError(f"the streaming query failed: {exc}")
        return draining_since is not None

    def _in_flight_now(self) -> int | None:
        position = self._position_or_unknown()
        return position.in_flight_batch_id if position is not None else None

    def _withdraw_unrun_batch(self) -> None:
        """After a drain: a batch Spark planned in this run that the batch gate held, or that never reached it
        (stopped while it was planned), is withdrawn from the checkpoint (``checkpoint/planned_batch.py``).

        Only with the gate in use (the job's batch function is ``StreamRuntime.foreach_batch``'s) is it known that
        nothing of the batch ran; without it, Spark re-runs the batch at the next start.
        """
        if self.held_batch is None and self.entered_batch is None:
            return
        position = self._position_or_unknown()
        planned = position.in_flight_batch_id if position is not None else None
        if planned is None or planned == self.in_flight_at_start:
            return
        if planned != self.held_batch and self.entered_batch is not None and planned <= self.entered_batch:
            return  # its function ran: never withdrawn
        withdraw_planned_batch(self.run.checkpoint_location, planned, self.config.storage_options)

    def _stop_now(self, why: str) -> None:
        """Stop the query without draining: Spark cancels the running batch and re-runs it on restart."""
        log.warning("job %s: %s: stopping now without draining", self.config.job_name, why)
        self.run.stopped_at_once = True
        self.run.query.stop()
        # Ask the checkpoint after the stop: a batch may have started or finished meanwhile.
        position = self._position_or_unknown()
        committed = position.batch_id if position is not None else None
        in_flight = position is not None and position.in_flight_batch_id is not None
        self.run.note = (f"stopped at once on {why}: batch {committed + 1 if committed is not None else 0} was "
                      "cancelled; Spark re-runs it on restart" if in_flight else
                      f"stopped at once on {why}; no batch was in flight")

    def _position_or_unknown(self) -> CheckpointPosition | None:
        try:
            return read_started_position(self.run.checkpoint_location, self.config.storage_options)
        except Exception as exc:  # noqa: BLE001 - only used for the note
            log.warning("could not read the position of %s: %s", self.run.checkpoint_location, exc)
            return None

    def _withdrawn(self) -> None:
        """The stop request was withdrawn before the drain ended: plan new data again."""
        log.info("job %s: the stop request was withdrawn, running again", self.config.job_name)
        self.home.clear_drained()  # the source's old answer must not end a later drain early
        with self.run.lock:
            self.run.stop_requested_at = self.run.stop_requested_by = None
            self.run.drain_overdue = False
        self.heartbeat.set_state(JobState.RUNNING)

    def _check_drain_overdue(self, draining_since: float) -> None:
        if self.run.drain_overdue or time.monotonic() - draining_since <= self.config.drain_timeout_seconds:
            return
        with self.run.lock:
            self.run.drain_overdue = True
        self.run.wake_status.set()
        log.warning("job %s: still draining %.0fs after the stop request: the running batch has not finished. "
                    "The job keeps draining; withdraw the request to keep it running, or stop it with "
                    "on_timeout kill", self.config.job_name, self.config.drain_timeout_seconds)

    def _stop_request(self) -> dict[str, Any] | None:
        """The standing stop request (``control/stop``), or None; SIGTERM writes one."""
        if self._signalled and not self.home.stop_requested():
            self.home.request_stop("SIGTERM")
        try:  # one being written where rename is not atomic reads as {}: it exists, its fields come next time
            request = self.home.stop_request(unreadable_stands=True)
        except OSError as exc:  # a storage hiccup: keep the last answer, look again at the next poll
            log.warning("job %s: could not read the stop request: %s", self.config.job_name, exc)
            return self._last_request
        self._last_request = request
        if request is None:
            return None
        run = self.run
        with run.lock:
            run.stop_requested_at = request.get("requested_at") or run.stop_requested_at or utc_now().isoformat()
            run.stop_requested_by = request.get("by") or "unknown"
        return request

    def _drained(self) -> bool:
        """The source answered "no new data" and every batch it planned has been committed."""
        drained = self.home.drained()  # None while being written where rename is not atomic: look again
        if not drained or "offsets" not in drained:
            return False
        with self.run.lock:
            last = self.run.last_offsets
        if last is not None and offsets_equal(to_nested(last), drained["offsets"]):
            return True
        # The listener may lag behind Spark, or no batch ran in this run: ask the checkpoint.
        position = read_started_position(self.run.checkpoint_location, self.config.storage_options)
        if position is not None and position.in_flight_batch_id is not None:
            return False
        if position is None or position.batch_id is None:
            return True  # no batch has ever run: nothing to finish
        offsets = position.committed_kafka_offsets()
        if offsets is not None and offsets_equal(to_nested(offsets), drained["offsets"]):
            self._record_batch(position.batch_id, offsets, records=0, counted=False)
            return True
        return False

    def _between_batches(self) -> bool:
        """Drained without waiting for the source's answer: Spark is between triggers and the checkpoint holds no
        batch in flight.

        The source looks for the stop request before it plans a batch, and Spark marks a trigger active before it
        asks the source, so once the request stands and a look finds no trigger active, no trigger can plan a
        batch again: the query has drained. The source's own answer comes only with the next trigger, up to
        a trigger interval later (measured: 0.4-0.5 s of an upgrade's downtime with a 1 s trigger).
        """
        try:
            if self.run.query.status.get("isTriggerActive", True):
                return False
            position = read_started_position(self.run.checkpoint_location, self.config.storage_options)
        except Exception as exc:  # noqa: BLE001 - the source's answer still ends the drain
            # Looked every 50 ms while draining: said once at warning, not on every look.
            if not self._between_batches_failed:
                log.warning("could not tell whether job %s is between batches (the drain waits for the source's "
                            "answer instead; said once): %s", self.config.job_name, exc)
                self._between_batches_failed = True
            return False
        return position is None or position.in_flight_batch_id is None

    def catch_up_with_checkpoint(self) -> None:
        """Progress events arrive asynchronously and may trail the query's end: the checkpoint is the truth."""
        try:
            position = read_started_position(self.run.checkpoint_location, self.config.storage_options)
            committed = position.batch_id if position is not None else None
            offsets = position.committed_kafka_offsets() if position is not None else None
        except Exception as exc:  # noqa: BLE001 - the status keeps what the listener saw
            log.warning("could not read the final position of %s: %s", self.run.checkpoint_location, exc)
            return
        deadline = time.monotonic() + PROGRESS_GRACE_SECONDS
        while self._listener_behind(committed) and time.monotonic() < deadline:
            time.sleep(0.02)  # the last batch's progress event is usually a few milliseconds behind
        if self._listener_behind(committed) and offsets is not None:
            self._record_batch(committed, offsets, records=0, counted=False)

    def _listener_behind(self, committed: int | None) -> bool:
        with self.run.lock:
            last = self.run.last_batch_id
            return committed is not None and (last is None or committed > last)

    def install_sigterm_handler(self):
        if threading.current_thread() is not threading.main_thread():
            return None

        def on_sigterm(signum, frame):
            self._signalled += 1

        return signal.signal(signal.SIGTERM, on_sigterm)

    def restore_sigterm_handler(self, previous) -> None:
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
