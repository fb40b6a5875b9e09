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

This module is the runtime's facade: it makes the run's shared state (``run_state.RunState``), composes the
components that receive it (``takeover``, ``source_setup``, ``supervision``, ``heartbeat``; ``metrics``,
``lineage``, ``asset_announcer`` and ``kafka_sink`` when configured; they call one another only through the
references given to them) and does the run itself. docs/architecture.md has a table of who owns and reads what.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.offsets import PartitionOffsets, to_nested
from airflow_kafka_stream.core.redaction import redact_text, secret_values
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.runtime.airflow_api import AirflowApi
from airflow_kafka_stream.runtime.asset_announcer import AssetAnnouncer
from airflow_kafka_stream.runtime.config import EXIT_FAILED, EXIT_OK, RunResult, StreamConfig, utc_now
from airflow_kafka_stream.runtime.group_committer import GroupCommitter, KafkaGroupCommit
from airflow_kafka_stream.runtime.heartbeat import Heartbeat, application_id, jvm_pid
from airflow_kafka_stream.runtime.kafka_sink import attach_kafka_sink, pause
from airflow_kafka_stream.runtime.lag_sampler import LagSampler
from airflow_kafka_stream.runtime.lineage import RuntimeLineage
from airflow_kafka_stream.runtime.listener import BatchListener
from airflow_kafka_stream.runtime.metrics import JobMetrics, RuntimeMetrics, metrics_settings
from airflow_kafka_stream.runtime.progress import BatchProgress
from airflow_kafka_stream.runtime.rehearsal import RehearsalSink
from airflow_kafka_stream.runtime.run_state import LAG_SAMPLES, PART_CLOSE_SECONDS, RunState
from airflow_kafka_stream.runtime.skipped_offsets import SkippedOffsets
from airflow_kafka_stream.runtime.source_setup import SourceSetup
from airflow_kafka_stream.runtime.standby import Standby
from airflow_kafka_stream.runtime.supervision import Supervision
from airflow_kafka_stream.runtime.takeover import Takeover
from airflow_kafka_stream.runtime.time_lag import TimeLagSampler
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)

__all__ = ["LAG_SAMPLES", "StreamRuntime", "run_stream"]


class StreamRuntime:
    """Runs one streaming query for a job home: generations, commits, status, graceful stop."""

    def __init__(self, spark, home_url: str, config: StreamConfig):
        config.validate()
        self.spark = spark
        self.config = config
        settings = metrics_settings(config)  # a malformed OTEL_* setting or port is refused here, named
        jvm = jvm_pid(spark)
        app_id = application_id(spark)
        self.home = JobHome(home_url, config.storage_options)
        self.run_state = run = RunState(starting_offsets=config.starting_offsets)
        self.skipped = SkippedOffsets(self.home, config.job_name)
        #: Batches whose progress reports no latest offsets (readMode=driver) are sampled from Kafka for the lag plot
        #: (``RunState.lag_samples``), at most once a heartbeat interval: then the records waiting after the batch.
        self.lag_sampler = LagSampler.for_kafka(config.client_config(), self._add_lag_sample, config.heartbeat_seconds)
        #: The lag in seconds (status ``time_lag``), measured at most once a heartbeat interval on its own thread.
        self.time_lag = TimeLagSampler.for_kafka(config.client_config(), config.heartbeat_seconds,
                                                 run.wake_status.set)
        self._finished: RunResult | None = None
        self.committer = GroupCommitter(KafkaGroupCommit(config.client_config(), config.group_id))
        self.standby = Standby.from_env(self.home, config.app_version, config.heartbeat_seconds,
                                        config.standby_max_wait_seconds)
        asset = config.asset()
        #: Announces the output asset's complete windows to Airflow (docs/assets.md), when the job declares one.
        self.assets = AssetAnnouncer(asset, self.home, config.job_name, AirflowApi.from_env()) if asset else None
        if self.assets is not None:
            run.add_part("assets", self.assets.document, self.assets.close)
        # The components, each given what it needs (see docs/architecture.md, "The runtime's components").
        self.heartbeat = Heartbeat(run, config, self.home, committer=self.committer, skipped=self.skipped,
                                   time_lag=self.time_lag, metrics=lambda: self.metrics,
                                   generation=lambda: self.generation, jvm_pid=jvm, application_id=app_id)
        self._metrics = (RuntimeMetrics(settings, run, config, self.home, status=self.heartbeat.status,
                                        silence=self.heartbeat.silence, time_lag=self.time_lag)
                         if settings is not None else None)
        self.metrics: JobMetrics | None = self._metrics.job_metrics if self._metrics is not None else None
        self.lineage = RuntimeLineage.from_env(config, getattr(spark, "version", None), run)  # None: not configured
        self.source = SourceSetup(run, config, self.home, spark, self.standby, prepare=self.prepare,
                                  generation=lambda: self.generation)
        self.supervision = Supervision(run, config, self.home, self.heartbeat, self._record_batch)
        self.takeover = Takeover(run, config, self.home, spark, self.standby, source=self.source,
                                 heartbeat=self.heartbeat, committer=self.committer, on_batch=self._on_batch)

    # -- the run state as the runtime's attributes ----------------------------------------------------
    @property
    def checkpoint_location(self) -> str | None:
        """The checkpoint of this run's generation (fsspec URL), known once the job is taken."""
        return self.run_state.checkpoint_location

    @checkpoint_location.setter
    def checkpoint_location(self, value: str | None) -> None:
        self.run_state.checkpoint_location = value

    @property
    def starting_offsets(self) -> str:
        """Where a fresh start of this run's generation begins (the config's, or the offsets a reset chose)."""
        return self.run_state.starting_offsets

    @starting_offsets.setter
    def starting_offsets(self, value: str) -> None:
        self.run_state.starting_offsets = value

    @property
    def _query(self):
        """The running query (None before it starts)."""
        return self.run_state.query

    # -- what the components offer, under the runtime's names -----------------------------------------
    def prepare(self, warm_up: Callable[[], None] | None = None) -> None:
        """Pick (or create) the checkpoint generation, clear stale requests, start the heartbeat.

        A standby first waits for its go (warmed up by ``warm_up``, by default the source's rehearsal,
        touching nothing of the running job). See :meth:`Takeover.prepare`.
        """
        self.takeover.prepare(warm_up)

    def read_stream(self):
        """A streaming DataFrame of the job's topics (Spark Kafka source columns); see
        :meth:`SourceSetup.read_stream`."""
        return self.source.read_stream()

    def source_options(self) -> dict[str, str]:
        """Options for the ``kafka_stream`` source, including the drain handshake path."""
        return self.source.source_options()

    def foreach_batch(self, function: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """``function(batch_df, batch_id)`` as the query's ``foreachBatch`` function, behind the drain's batch gate.

        A stop drains the query after its running batch. This project's source plans nothing once a stop is requested;
        Spark's own connector may plan one more batch, which this wrapper holds before ``function`` runs and withdraws
        from the checkpoint (``Supervision.gate``). Use it for the job's own batch function, not for a rehearsal's.
        """
        gate, owner = self.supervision.gate, self.supervision.require_owner

        def gated(batch_df, batch_id: int) -> None:
            gate(batch_id)
            function(batch_df, batch_id)
            owner()  # resumed after another driver took the job: Spark must not commit this batch

        return gated

    def kafka_sink(self, topic: str, **options: Any) -> Callable[[Any, int], None]:
        """The foreachBatch function writing each batch to ``topic`` exactly once (``runtime/kafka_sink.py``)."""
        return self.foreach_batch(attach_kafka_sink(self, topic, **options).write)

    def spark_checkpoint_location(self, location: str | None = None) -> str:
        """The checkpoint's name for Spark's Hadoop file systems (see :meth:`SourceSetup.spark_checkpoint_location`)."""
        return self.source.spark_checkpoint_location(location)

    def status(self) -> dict[str, Any]:
        return self.heartbeat.status()  # the status document as it would be written now

    # -- the job's code between prepare and run ----------------------------------------------------
    @property
    def generation(self) -> int | None:
        """The checkpoint generation this run uses. A standby knows it only after its go: read here before
        ``run``, it makes the standby wait for the go first (its query is then not rehearsed); a batch
        function reads it when its batch runs, and during the rehearsal it is 0."""
        if self.run_state.generation is None and self.standby is not None and not self.standby.went:
            if self.run_state.rehearsing:
                return 0
            self.prepare()
        return self.run_state.generation

    @generation.setter
    def generation(self, value: int | None) -> None:
        self.run_state.generation = value

    def __enter__(self) -> StreamRuntime:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None and self.run_state.prepared and self._finished is None:
            self.fail(exc)
        elif exc is not None and self.standby is not None and not self.standby.went:
            self._record_error(exc)  # a standby that fails building its query says why in its record
            self.standby.fail_early(self.run_state.error or str(exc))
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
        self.run_state.error = redact_text(f"{type(exc).__name__}: {exc}", secrets)[:2000]
        log.error("job %s failed: %s", self.config.job_name, self.run_state.error)

    def add_dead_letters(self, count: int) -> None:
        """Count records sent to the dead-letter destination (shown in the status)."""
        with self.run_state.lock:
            self.run_state.dead_letters += count

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
        run, takeover, supervision = self.run_state, self.takeover, self.supervision
        try:
            if self.source.standing_by() and run.defined_in_standby:
                self.prepare(warm_up=lambda: takeover.warm_up_query(writer, rehearsal_sink))
            self.prepare()
        except BaseException:
            takeover.cancel_ahead()
            raise
        if self.metrics is not None:
            self.metrics.start()
        batch_listener = BatchListener(self._on_batch)
        self.spark.streams.addListener(batch_listener.listener)
        previous_handler = supervision.install_sigterm_handler()
        by_request = False
        try:
            if run.fence_reason is not None:
                raise JobStateError(run.fence_reason)
            query = takeover.adopt_ahead()
            if query is None:
                self.source.bind_for_run()
                query = writer.option("checkpointLocation", self.spark_checkpoint_location()).start()
            self.heartbeat.keep_query(query)
            batch_listener.query_id = run.query_ids[0]
            self.heartbeat.set_state(JobState.RUNNING)
            takeover.query_started()
            if self.lineage is not None:  # a standby gets here only after its go: the job is its own now
                self.lineage.start(run.last_offsets, run.last_batch_id)
            by_request = supervision.supervise()
        except Exception as exc:  # noqa: BLE001 - recorded as FAILED in the status and the result
            self._record_error(exc)
        finally:
            takeover.cancel_ahead()  # not adopted: the run failed before its query started
            if run.query is not None and run.query.isActive:
                run.query.stop()
            supervision.restore_sigterm_handler(previous_handler)
            self._remove_listener(batch_listener.listener)
        return self._finish(clear_request=by_request)

    def _on_batch(self, progress: BatchProgress) -> None:
        offsets = progress.end_offsets
        if offsets is None:
            log.warning("batch %s has no Kafka offsets in its progress; nothing to commit", progress.batchId)
            return
        if self._metrics is not None:
            self._metrics.on_batch(progress)
        if progress.backlog is not None:
            self._add_lag_sample(progress.batchId, progress.backlog)
        else:
            self.lag_sampler.submit(progress.batchId, offsets)
        with self.run_state.lock:
            previous = self.run_state.last_offsets
        self.time_lag.batch_committed(progress.start_offsets or previous, offsets, progress.numInputRows or 0)
        if not self.heartbeat.still_owner():
            return  # a batch a superseded driver finished: the group is the other driver's
        pause("spark-committed", progress.batchId)
        self._record_batch(progress.batchId, offsets, records=progress.numInputRows or 0)
        if self.assets is not None:
            self.assets.batch_committed(progress, self.run_state.generation)
        if self.lineage is not None:
            self.lineage.batch(progress.batchId, offsets)  # RUNNING with the position, at a bounded rate

    def _add_lag_sample(self, batch_id: int, records_waiting: int) -> None:
        with self.run_state.lock:
            self.run_state.lag_samples.append([round(time.time(), 1), batch_id, records_waiting])

    def _record_batch(self, batch_id: int, offsets: PartitionOffsets, records: int, counted: bool = True) -> None:
        run = self.run_state
        with run.lock:
            if run.last_batch_id is not None and batch_id < run.last_batch_id:
                return
            run.last_batch_id, run.last_offsets = batch_id, offsets
            if counted:
                run.batches += 1
                run.records += records
        self.committer.submit(batch_id, offsets)
        run.wake_status.set()

    def _finish(self, clear_request: bool) -> RunResult:
        if self._finished is not None:
            return self._finished
        run = self.run_state
        if not run.superseded:  # else the checkpoint and the group are another driver's now
            self.supervision.catch_up_with_checkpoint()
        with run.lock:
            batch_id, offsets = run.last_batch_id, run.last_offsets
        if run.superseded:
            self.committer.discard()
        elif batch_id is not None and offsets is not None:
            self.committer.submit(batch_id, offsets)
        if not self.committer.close(self.config.final_commit_timeout_seconds):
            log.warning("the final group commit of batch %s did not complete: %s", batch_id,
                        self.committer.last_error)
        failed = run.error is not None
        run.stopped_at = utc_now()
        run.state = JobState.FAILED if failed else JobState.STOPPED
        run.closing.set()
        run.wake_status.set()
        self.heartbeat.join(10)
        try:
            if not run.superseded:
                self.skipped.collect()  # the last batch's skips, reported after the heartbeat's last look
        except Exception as exc:  # noqa: BLE001 - the files stay; the next run of the job records them
            log.warning("job %s: could not record the offsets the source skipped: %s", self.config.job_name, exc)
        try:
            self.heartbeat.write_status()  # nothing, when superseded
        except Exception as exc:  # noqa: BLE001 - e.g. the storage outage that fenced the job
            log.error("could not write the final status %s of job %s: %s", run.state, self.config.job_name, exc)
        # After the final status: each waits out a Kafka look in flight (measured 0.2-0.8 s), which must not
        # delay the STOPPED an upgrade waits for.
        self.lag_sampler.close()
        self.time_lag.close()
        for close in run.closers:  # the run's optional parts: announce the last windows, end the sink's producer
            close(PART_CLOSE_SECONDS)
        if self.metrics is not None:
            self.metrics.close()  # one last export (up 0, the final state), bounded
        if self.lineage is not None:
            self.lineage.end(offsets, batch_id, run.error, run.superseded or run.stopped_at_once)  # bounded
        if clear_request and not failed and not run.superseded:
            self.home.clear_stop_request()
        result = RunResult(
            state=run.state,
            exit_code=EXIT_FAILED if failed else EXIT_OK,
            batches=run.batches,
            records=run.records,
            last_batch_id=batch_id,
            last_offsets=to_nested(offsets) if offsets else None,
            error=run.error,
            note=run.note,
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
