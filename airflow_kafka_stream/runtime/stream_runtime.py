"""Run a Spark Structured Streaming query that reads Kafka under this project's control.

What a user's job gets by running its query through :class:`StreamRuntime`:

* the checkpoint lives in the job home's current generation (``0001`` is made on
  first start), and the query starts where that generation says;
* after every batch Spark has committed (``commits/N`` written) its end offsets
  are committed to the consumer group, and once more when the query ends;
* ``<home>/status.json`` is rewritten after every batch and every few seconds;
* a stop request (``<home>/control/stop``, or SIGTERM) drains the query: the
  source plans no new batch, the running one finishes and commits, then the
  query stops and the job exits 0 with status STOPPED. The request is revocable:
  when it is withdrawn before the drain ends, the job returns to RUNNING. A
  request in ``kill`` mode stops the query at once (the running batch is
  cancelled and re-run on restart);
* a driver that cannot write its heartbeat for two intervals fences itself (stops
  the query, exits non-zero) before the control plane would take it for dead;
* started as a warm standby (``core.standby.STANDBY_ENV`` set by an upgrade), the
  runtime first warms up and waits for the upgrade's go, touching nothing of the
  running job, and only then takes the job (see ``runtime/standby.py``).

A job stays short; the ``with`` block reports a failure while the query is being
built (after ``read_stream``) as FAILED instead of leaving a STARTING heartbeat::

    with StreamRuntime(spark, home_url, StreamConfig(job_name="orders", ...)) as runtime:
        events = runtime.read_stream()
        writer = events.selectExpr(...).writeStream.foreachBatch(write)
        result = runtime.run(writer)
    sys.exit(result.exit_code)

This module is the runtime's facade: the run itself (start the query, record batches, finish). Its
other parts are mixed in from modules named for what they do: ``takeover`` (the start protocol),
``source_setup`` (source options, the checkpoint's Hadoop name), ``supervision`` (stop requests and
the drain) and ``heartbeat`` (status, heartbeat, fencing); ``config`` holds :class:`StreamConfig`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.offsets import PartitionOffsets, to_nested
from airflow_kafka_stream.core.redaction import redact_text, secret_values
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.runtime.config import EXIT_FAILED, EXIT_OK, RunResult, StreamConfig, utc_now
from airflow_kafka_stream.runtime.group_committer import GroupCommitter, KafkaGroupCommit
from airflow_kafka_stream.runtime.heartbeat import Heartbeat, application_id, jvm_pid
from airflow_kafka_stream.runtime.lag_sampler import LagSampler
from airflow_kafka_stream.runtime.listener import BatchListener
from airflow_kafka_stream.runtime.metrics import RuntimeMetrics
from airflow_kafka_stream.runtime.progress import BatchProgress
from airflow_kafka_stream.runtime.rehearsal import RehearsalSink
from airflow_kafka_stream.runtime.skipped_offsets import SkippedOffsets
from airflow_kafka_stream.runtime.source_setup import SourceSetup
from airflow_kafka_stream.runtime.standby import Standby
from airflow_kafka_stream.runtime.supervision import Supervision
from airflow_kafka_stream.runtime.takeover import StartedAhead, Takeover
from airflow_kafka_stream.runtime.time_lag import TimeLagSampler
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)

#: Lag samples kept in the status file (one per batch of this run; a few KB).
LAG_SAMPLES = 120


class StreamRuntime(Takeover, SourceSetup, Supervision, Heartbeat, RuntimeMetrics):
    """Runs one streaming query for a job home: generations, commits, status, graceful stop."""

    def __init__(self, spark, home_url: str, config: StreamConfig):
        config.validate()
        self.spark = spark
        self.config = config
        self._setup_metrics()  # a malformed OTEL_* setting or port is refused here, named
        self._jvm_pid = jvm_pid(spark)
        self._application_id = application_id(spark)
        self.home = JobHome(home_url, config.storage_options)
        self._lock = threading.Lock()
        self._state = JobState.STARTING
        self._started_at = utc_now()
        self._stopped_at: datetime | None = None
        self._error: str | None = None
        self._query = None
        self._query_ids: tuple[str | None, str | None] = (None, None)
        self._written_state: str | None = None  # the state the heartbeat last wrote
        self._beat_times = (0.0, 0.0)  # seconds the last status write took to build and to write
        self._batches = 0
        self._records = 0
        self._last_batch_id: int | None = None
        self._last_offsets: PartitionOffsets | None = None
        self._dead_letters = 0
        self.skipped = SkippedOffsets(self.home, config.job_name)
        self._read_placement: dict[str, Any] | None = None
        #: [epoch, batch id, records waiting when it was planned] of the newest batches: the job page's lag plot.
        #: Batches whose progress reports no latest offsets (readMode=driver) are sampled from Kafka instead,
        #: at most once a heartbeat interval: then the records waiting after the batch.
        self._lag_samples: deque[list] = deque(maxlen=LAG_SAMPLES)
        self.lag_sampler = LagSampler.for_kafka(config.client_config(), self._add_lag_sample, config.heartbeat_seconds)
        self._stop_requested_at: str | None = None
        self._stop_requested_by: str | None = None
        self._signalled = 0
        self._wake_status = threading.Event()
        #: The lag in seconds (status ``time_lag``), measured at most once a heartbeat interval on its own thread.
        self.time_lag = TimeLagSampler.for_kafka(config.client_config(), config.heartbeat_seconds,
                                                 self._wake_status.set)
        self._status_thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._prepared = False
        self._rehearsing = False
        self._finished: RunResult | None = None
        self._note: str | None = None
        self._drain_overdue = False
        self._between_batches_failed = False  # warned once that the drain could not read the checkpoint
        self._fence_reason: str | None = None
        self._last_beat_ok = time.monotonic()
        self._last_request: dict[str, Any] | None = None
        self._generation: int | None = None
        self._binding_file: str | None = None
        #: A standby's query started before its go, waiting in its source (see Takeover._start_ahead).
        self._ahead: StartedAhead | None = None
        self.checkpoint_location: str | None = None
        self.starting_offsets: str = config.starting_offsets
        self.committer = GroupCommitter(KafkaGroupCommit(config.client_config(), config.group_id))
        self.standby = Standby.from_env(self.home, config.app_version, config.heartbeat_seconds,
                                        config.standby_max_wait_seconds)

    # -- the job's code between prepare and run ----------------------------------------------------
    @property
    def generation(self) -> int | None:
        """The checkpoint generation this run uses. A standby knows it only after its go: read here before
        ``run``, it makes the standby wait for the go first (its query is then not rehearsed); a batch
        function reads it when its batch runs, and during the rehearsal it is 0."""
        if self._generation is None and self.standby is not None and not self.standby.went:
            if self._rehearsing:
                return 0
            self.prepare()
        return self._generation

    @generation.setter
    def generation(self, value: int | None) -> None:
        self._generation = value

    def __enter__(self) -> StreamRuntime:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None and self._prepared and self._finished is None:
            self.fail(exc)
        return False  # the job's own exception propagates

    def fail(self, exc: BaseException) -> RunResult:
        """Report a failure of the job's code before or around ``run``: status FAILED, heartbeat stopped.

        Without it, an exception while building the query leaves the heartbeat thread writing
        STARTING, and every guard of the control plane takes the job for running.
        """
        if self._finished is not None:
            return self._finished
        self._record_error(exc)
        return self._finish(clear_request=False)

    def _record_error(self, exc: BaseException) -> None:
        secrets = secret_values({**self.config.client_config(), **self.config.source_options})
        self._error = redact_text(f"{type(exc).__name__}: {exc}", secrets)[:2000]
        log.error("job %s failed: %s", self.config.job_name, self._error)

    def add_dead_letters(self, count: int) -> None:
        """Count records sent to the dead-letter destination (shown in the status)."""
        with self._lock:
            self._dead_letters += count

    # -- running --------------------------------------------------------------------------------
    def run(self, writer, query_name: str | None = None, rehearsal_sink: RehearsalSink | None = None) -> RunResult:
        """Start the query from ``writer`` (a DataStreamWriter) and supervise it until it ends.

        A standby first rehearses the query (Spark's ``noop`` sink, or ``rehearsal_sink(df, scratch_url)``: a
        writer of the same query's DataFrame pointed at the scratch folder, for a job whose sink is safe to
        rehearse there) and waits for its go; see ``runtime/rehearsal.py``.
        """
        if self._finished is not None:
            raise JobStateError(f"job {self.config.job_name}: this runtime already ended ({self._finished.state}); "
                                "a StreamRuntime runs one query: create a new one to start again")
        if query_name:
            writer = writer.queryName(query_name)
        try:
            if self._standing_by() and self._binding_file is not None:
                self.prepare(warm_up=lambda: self._warm_up_query(writer, rehearsal_sink))
            self.prepare()
        except BaseException:
            self._cancel_ahead()
            raise
        if self.metrics is not None:
            self.metrics.start()
        batch_listener = BatchListener(self._on_batch)
        self.spark.streams.addListener(batch_listener.listener)
        previous_handler = self._install_sigterm_handler()
        by_request = False
        try:
            if self._fence_reason is not None:
                raise JobStateError(self._fence_reason)
            query = self._adopt_ahead()
            if query is None:
                self._bind_for_run()
                query = writer.option("checkpointLocation", self.spark_checkpoint_location()).start()
            self._keep_query(query)
            batch_listener.query_id = self._query_ids[0]
            self._set_state(JobState.RUNNING)
            self._query_started()
            by_request = self._supervise()
        except Exception as exc:  # noqa: BLE001 - recorded as FAILED in the status and the result
            self._record_error(exc)
        finally:
            self._cancel_ahead()  # not adopted: the run failed before its query started
            if self._query is not None and self._query.isActive:
                self._query.stop()
            self._restore_sigterm_handler(previous_handler)
            self._remove_listener(batch_listener.listener)
        return self._finish(clear_request=by_request)

    def _warm_up_query(self, writer, rehearsal_sink: RehearsalSink | None) -> None:
        """A standby's work before READY: rehearse the query, then start it ahead of the go."""
        self._rehearse_writer(writer, rehearsal_sink)
        if not self.standby.rehearsal_request().get("check"):
            self._start_ahead(writer)

    def _rehearse_writer(self, writer, rehearsal_sink: RehearsalSink | None) -> None:
        if getattr(writer, "_df", None) is None:
            log.warning("job %s: the writer has no DataFrame to rehearse (not a classic DataStreamWriter); "
                        "rehearsing the source alone", self.config.job_name)
            self._warm_up()
            return
        self._rehearsing = True
        try:
            self._rehearse_query(writer, rehearsal_sink)
        finally:
            self._rehearsing = False

    def _on_batch(self, progress: BatchProgress) -> None:
        offsets = progress.end_offsets
        if offsets is None:
            log.warning("batch %s has no Kafka offsets in its progress; nothing to commit", progress.batchId)
            return
        self._metrics_on_batch(progress)
        if progress.backlog is not None:
            self._add_lag_sample(progress.batchId, progress.backlog)
        else:
            self.lag_sampler.submit(progress.batchId, offsets)
        with self._lock:
            previous = self._last_offsets
        self.time_lag.batch_committed(progress.start_offsets or previous, offsets, progress.numInputRows or 0)
        self._record_batch(progress.batchId, offsets, records=progress.numInputRows or 0)

    def _add_lag_sample(self, batch_id: int, records_waiting: int) -> None:
        with self._lock:
            self._lag_samples.append([round(time.time(), 1), batch_id, records_waiting])

    def _record_batch(self, batch_id: int, offsets: PartitionOffsets, records: int, counted: bool = True) -> None:
        with self._lock:
            if self._last_batch_id is not None and batch_id < self._last_batch_id:
                return
            self._last_batch_id, self._last_offsets = batch_id, offsets
            if counted:
                self._batches += 1
                self._records += records
        self.committer.submit(batch_id, offsets)
        self._wake_status.set()

    def _finish(self, clear_request: bool) -> RunResult:
        if self._finished is not None:
            return self._finished
        self._catch_up_with_checkpoint()
        with self._lock:
            batch_id, offsets = self._last_batch_id, self._last_offsets
        if batch_id is not None and offsets is not None:
            self.committer.submit(batch_id, offsets)
        if not self.committer.close(self.config.final_commit_timeout_seconds):
            log.warning("the final group commit of batch %s did not complete: %s", batch_id,
                        self.committer.last_error)
        failed = self._error is not None
        self._stopped_at = utc_now()
        self._state = JobState.FAILED if failed else JobState.STOPPED
        self._closing.set()
        self._wake_status.set()
        if self._status_thread is not None:
            self._status_thread.join(10)
        try:
            self.skipped.collect()  # the last batch's skips, reported after the heartbeat's last look
        except Exception as exc:  # noqa: BLE001 - the files stay; the next run of the job records them
            log.warning("job %s: could not record the offsets the source skipped: %s", self.config.job_name, exc)
        try:
            self._write_status()
        except Exception as exc:  # noqa: BLE001 - e.g. the storage outage that fenced the job
            log.error("could not write the final status %s of job %s: %s", self._state, self.config.job_name, exc)
        # After the final status: each waits out a Kafka look in flight (measured 0.2-0.8 s), which must not
        # delay the STOPPED an upgrade waits for.
        self.lag_sampler.close()
        self.time_lag.close()
        if self.metrics is not None:
            self.metrics.close()  # one last export (up 0, the final state), bounded
        if clear_request and not failed:
            self.home.clear_stop_request()
        result = RunResult(
            state=self._state,
            exit_code=EXIT_FAILED if failed else EXIT_OK,
            batches=self._batches,
            records=self._records,
            last_batch_id=batch_id,
            last_offsets=to_nested(offsets) if offsets else None,
            error=self._error,
            note=self._note,
        )
        self._finished = result
        log.info("job %s %s", self.config.job_name, result.summary())
        return result

    # -- listeners ---------------------------------------------------------------------------------
    def _remove_listener(self, listener) -> None:
        try:
            self.spark.streams.removeListener(listener)
        except Exception as exc:  # noqa: BLE001 - the session may already be gone
            log.warning("removing the progress listener failed: %s", exc)


def run_stream(spark, home_url: str, config: StreamConfig,
               build: Callable[[Any, StreamRuntime], Any], query_name: str | None = None) -> RunResult:
    """Read the job's topics, let ``build(df, runtime)`` return a DataStreamWriter, run it.

    An error raised by ``build`` ends the job FAILED (status written, heartbeat stopped) and propagates.
    """
    with StreamRuntime(spark, home_url, config) as runtime:
        return runtime.run(build(runtime.read_stream(), runtime), query_name=query_name)
