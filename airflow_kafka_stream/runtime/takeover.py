"""The start protocol: how a driver takes a job home (after standing by, for a warm standby).

Under the job lock it refuses a second live driver, picks the checkpoint generation and where it
starts, finishes an interrupted offset reset, records ``job.json`` and writes the first STARTING
heartbeat; a standby first warms up and waits for its go. A component of
:class:`~airflow_kafka_stream.runtime.StreamRuntime`: it writes the generation, checkpoint, start offsets,
start time and last batch of the shared :class:`~airflow_kafka_stream.runtime.run_state.RunState`, and uses the
:class:`~airflow_kafka_stream.runtime.source_setup.SourceSetup` (options, checkpoint name) and the
:class:`~airflow_kafka_stream.runtime.heartbeat.Heartbeat` (first status, the heartbeat thread) it is given.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.checkpoint.reader import read_started_position
from airflow_kafka_stream.checkpoint.writer import recover_incomplete_append
from airflow_kafka_stream.core.cluster import spark_url
from airflow_kafka_stream.core.liveness import STALE_AFTER_INTERVALS, Life
from airflow_kafka_stream.core.redaction import is_secret_key
from airflow_kafka_stream.core.rehearsal import RehearsalResult, streaming_source_count
from airflow_kafka_stream.core.sink import sink_from_spec
from airflow_kafka_stream.core.spark_kafka_options import SPARK_KAFKA_FORMAT, connector_options
from airflow_kafka_stream.core.standby import StandbyState
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.runtime import rehearsal
from airflow_kafka_stream.runtime.config import utc_now
from airflow_kafka_stream.runtime.heartbeat import Heartbeat
from airflow_kafka_stream.runtime.listener import BatchListener
from airflow_kafka_stream.runtime.run_state import RunState
from airflow_kafka_stream.runtime.source_setup import SourceSetup
from airflow_kafka_stream.runtime.standby import rehearse
from airflow_kafka_stream.source.binding import answered, write_cancelled, write_waiting
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage import status as st
from airflow_kafka_stream.storage.operation import recorded_operation

log = logging.getLogger(__name__)

#: How long a starting driver waits for a control-plane operation that holds the job lock to finish.
START_LOCK_WAIT_SECONDS = 30.0
#: How long, and how often, a standby looks for the upgrade's go operation to release the lock before it takes it.
GO_RELEASE_WAIT_SECONDS = 5.0
GO_RELEASE_POLL_SECONDS = 0.01


#: How long a query started ahead waits for its go beyond the standby's own longest wait.
AHEAD_WAIT_MARGIN_SECONDS = 60.0
#: How often a standby looks for the answer of the source of its query started ahead.
ANSWER_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class StartedAhead:
    """A standby's query started before its go on the checkpoint it expects to take, waiting in its source."""

    query: Any
    location: str


class RehearsalRefused(JobStateError):
    """The standby's rehearsal found that the new version must not take over (the upgrade ends before the stop)."""


class Takeover:
    """The run's start: prepare (stand by if a standby), then take the job under its lock.

    It owns a standby's query started ahead of its go. ``on_batch`` is the runtime's progress handler (a
    listener is made once before the go so that its py4j classes are loaded).
    """

    def __init__(self, run: RunState, config, home, spark, standby, *, source: SourceSetup, heartbeat: Heartbeat,
                 committer, on_batch: Callable[[Any], None]) -> None:
        self.run = run
        self.config = config
        self.home = home
        self.spark = spark
        self.standby = standby
        self.source = source
        self.heartbeat = heartbeat
        self.committer = committer
        self._on_batch = on_batch
        #: A standby's query started before its go, waiting in its source (see :meth:`start_ahead`).
        self._ahead: StartedAhead | None = None

    def prepare(self, warm_up: Callable[[], None] | None = None) -> None:
        """Pick (or create) the checkpoint generation, clear stale requests, start the heartbeat.

        A standby first waits for its go (warmed up by ``warm_up``, by default the source's rehearsal,
        touching nothing of the running job).
        """
        if self.run.prepared:
            return
        standby = self.standby
        if standby is not None and not standby.went:
            standby.stand_by(warm_up or self.warm_up)
            self.run.started_at = utc_now()  # this driver's run as the job's driver starts now
        try:
            self._take_job()
        except BaseException as exc:
            if standby is not None:
                standby.end(StandbyState.FAILED, f"taking over failed: {type(exc).__name__}: {exc}")
            raise
        if standby is not None:
            standby.took_over()

    def warm_up(self) -> None:
        """A standby's work before READY when its job reads what it may know only after the go (its generation)
        before it builds its query: what takes time and touches nothing of the running job.

        The job home and its savepoints are read (a restore will need them), and the source runs once
        with the job's options into a scratch folder (see :func:`~airflow_kafka_stream.runtime.standby.rehearse`).
        The full rehearsal of the job's own query is :meth:`rehearse_query`.
        """
        self._read_home()
        self.standby.note_rehearsal({"verdict": "not rehearsed", "reason": (
            "the job read runtime.generation (or the source options) before it built its query, so its standby "
            "had to wait for the go first; read it inside the batch function to have the query rehearsed")})
        self._rehearse_source()
        BatchListener(self._on_batch)  # the listener's py4j classes

    def _rehearse_source(self) -> None:
        """The job's source run once into a scratch folder (``runtime.standby.rehearse``): it read from Kafka in
        this driver before the standby may say READY."""
        options = self.source.options_for(self.config.starting_offsets)
        if self.config.source_format == SPARK_KAFKA_FORMAT:
            options = connector_options(options, None)
        running = self.home.status_document()
        seconds = rehearse(self.spark, self.config.source_format, options, running.last_offsets if running else None)
        log.info("job %s: the standby rehearsed its source in %.1fs", self.config.job_name, seconds)

    def _read_home(self) -> None:
        self.home.require()
        if self.home.fs.exists(self.home.p(*layout.SAVEPOINTS)):
            self.home.fs.ls(self.home.p(*layout.SAVEPOINTS))

    def warm_up_query(self, writer, rehearsal_sink) -> None:
        """A standby's work before READY: rehearse the query (the source alone for a writer without a DataFrame,
        not a classic DataStreamWriter), then start it ahead of the go."""
        if getattr(writer, "_df", None) is None:
            log.warning("job %s: the writer has no DataFrame to rehearse (not a classic DataStreamWriter); "
                        "rehearsing the source alone", self.config.job_name)
            self.warm_up()
        else:
            self.run.rehearsing = True
            try:
                self.rehearse_query(writer, rehearsal_sink)
            finally:
                self.run.rehearsing = False
        if not self.standby.rehearsal_request().get("check"):
            self.start_ahead(writer)

    def rehearse_query(self, writer, rehearsal_sink) -> None:
        """A standby's work before READY: the job's own query rehearsed on a private copy of its state
        (``runtime/rehearsal.py``); raises RehearsalRefused when the verdict does not let this upgrade go on."""
        self._read_home()
        asked = self.standby.rehearsal_request()
        self._refuse_unseedable_start(writer, bool(asked.get("drop_state")))
        generation = self.home.current_generation()
        if generation is None:
            result = RehearsalResult.of({"verdict": "not rehearsed", "reason": "the job has no checkpoint yet"})
        else:
            self.source.set_hadoop_settings()
            setup = rehearsal.RehearsalSetup(
                home=self.home, token=self.standby.token, checkpoint_url=self.home.checkpoint_url(generation),
                binding_file=self.run.binding_file,
                options=self.source.options_for(self.config.starting_offsets), drop_state=bool(asked.get("drop_state")),
                timeout_seconds=float(asked.get("timeout_seconds") or 300.0), sink=rehearsal_sink,
                spark_url=lambda url: spark_url(url, self.config.storage_options))
            result = rehearsal.rehearse(self.spark, writer, setup)
        log.info("job %s: the standby's rehearsal: %s (%s)", self.config.job_name, result.verdict, result.reason)
        self.standby.note_rehearsal(result.to_dict())
        if not asked.get("check") and not result.acceptable(bool(asked.get("drop_state"))):
            raise RehearsalRefused(f"the rehearsal of version {self.config.app_version} before the stop: "
                                   f"{result.verdict}: {result.reason}")
        if self.run.binding_file is None and not result.batches:
            # No query started ahead answers for Spark's connector: READY must rest on a read through it here.
            self._rehearse_source()
        BatchListener(self._on_batch)  # the listener's py4j classes

    def _refuse_unseedable_start(self, writer, drop_state: bool) -> None:
        """A drop-state upgrade of a query on Spark's connector starts a new checkpoint whose start the runtime
        seeds for the query's one streaming source (``SourceSetup.bind_for_run``); a query with more streaming
        sources is refused before READY, so its upgrade ends before the old version is stopped."""
        if not drop_state or self.run.binding_file is not None or getattr(writer, "_df", None) is None:
            return
        try:
            found = streaming_source_count(writer._df._jdf.queryExecution().logical().toString())
        except Exception as exc:  # noqa: BLE001 - Spark Connect has no JVM plan: the start then fails safe
            log.warning("job %s: could not count the query's streaming sources: %s", self.config.job_name, exc)
            return
        if found > 1:
            raise RehearsalRefused(
                f"version {self.config.app_version} reads {found} streaming sources, one with Spark's Kafka "
                "connector: a drop-state upgrade through a standby can seed the new checkpoint's start for one "
                "source only. Upgrade with --no-standby (standby=False): the new version then starts after the stop, "
                "each source where it is told to")

    def start_ahead(self, writer) -> None:
        """Start the job's query before the go on the current generation's checkpoint, its source waiting for its
        binding (``source/binding.py``): Spark's query start, the Python process serving the source and this
        package's imports are then done while the old version still runs, instead of after the go (measured:
        0.85 s of a 2.5 s handover). Spark reads nothing of the checkpoint before the source is made. A query
        that cannot start leaves the usual start after the go; one that starts must have its source answer
        (:meth:`_await_source_answer`) before the standby may report READY."""
        generation = self.home.current_generation()
        if generation is None or self.run.binding_file is None:
            log.info("job %s: the standby's query starts after its go (Spark's connector cannot be held before it "
                     "reads the checkpoint)", self.config.job_name)
            return
        location = self.source.spark_checkpoint_location(self.home.checkpoint_url(generation))
        write_waiting(self.run.binding_file, self.standby.wait_seconds + AHEAD_WAIT_MARGIN_SECONDS)
        try:
            query = writer.option("checkpointLocation", location).start()
        except Exception as exc:  # noqa: BLE001 - the go then starts the query as without a start ahead
            log.warning("job %s: could not start the query ahead of the go (%s); it starts after the go",
                        self.config.job_name, exc)
            self.source.bind_for_run()
            return
        self._ahead = StartedAhead(query, location)
        self._await_source_answer(query)
        log.info("job %s: the standby's query started ahead of the go on %s; its source answered and waits for "
                 "the go", self.config.job_name, location)

    def _await_source_answer(self, query) -> None:
        """Until the source of the query started ahead answers from Spark's Python process that serves it
        (``source/binding.py``): READY must mean that process is up. Raises (the standby fails, and its upgrade
        ends before the old version is stopped) when the query ends first or no answer comes in time."""
        timeout = self.config.standby_source_answer_seconds
        deadline = time.monotonic() + timeout
        while answered(self.run.binding_file) is None:
            if not query.isActive:
                raise JobStateError(f"the query the standby started ahead of its go ended before its source came "
                                    f"up: {query.exception() or 'no error given'}")
            if time.monotonic() > deadline:
                raise JobStateError(
                    f"the source of the query the standby started ahead of its go did not answer within {timeout:g}s "
                    "(Spark's Python process that serves it did not come up or connect back; a loaded machine is "
                    "the usual cause): the standby is not READY, so the upgrade ends before the old version is "
                    "stopped. Try again when the machine has room, or give StreamConfig.standby_source_answer_seconds "
                    "more time")
            time.sleep(ANSWER_POLL_SECONDS)

    def adopt_ahead(self):
        """After the take: the query started ahead, now bound to this run's options, when it waits on the
        checkpoint the take chose; None (the query is let go) otherwise, and the caller starts one."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        location = self.source.spark_checkpoint_location()
        if ahead.location == location and ahead.query.isActive:
            self.source.bind_for_run()
            if self.standby is not None:
                self.standby.note_started_ahead()
            return ahead.query
        log.info("job %s: the query started ahead on %s is not used (the job's checkpoint is %s)",
                 self.config.job_name, ahead.location, location)
        self._let_go(ahead)
        return None

    def cancel_ahead(self) -> None:
        """The standby did not take the job: let the query started ahead go."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self._let_go(ahead)

    def _let_go(self, ahead: StartedAhead) -> None:
        write_cancelled(self.run.binding_file)  # its source raises rather than read with options of no run
        try:
            ahead.query.stop()
        except Exception as exc:  # noqa: BLE001 - it read and wrote nothing; only its process lingers
            log.warning("job %s: stopping the query started ahead: %s", self.config.job_name, exc)

    def _take_job(self) -> None:
        # Under the job lock: a reset or restore in progress must finish first, and once the STARTING
        # heartbeat is written every control-plane operation sees this driver as running.
        args = {"job": self.config.job_name, "pid": os.getpid(), "host": socket.gethostname()}
        # A standby reads its go while the upgrade that wrote it still holds the lock: wait for brief holders.
        self._await_go_release()
        with recorded_operation(self.home, "start", args, by=f"driver {socket.gethostname()}:{os.getpid()}",
                                existing_home=False, lock_wait_seconds=START_LOCK_WAIT_SECONDS) as record:
            self._refuse_second_driver()
            run = self.run
            run.generation, run.starting_offsets = self._choose_generation()
            run.checkpoint_location = self.home.checkpoint_url(run.generation)
            if recover_incomplete_append(run.checkpoint_location, self.config.storage_options):
                log.warning("job %s: completed or rolled back an interrupted offset reset before starting",
                            self.config.job_name)
            position = read_started_position(run.checkpoint_location, self.config.storage_options)
            committed = position.batch_id if position is not None else None
            offsets = position.committed_kafka_offsets() if position is not None else None
            self._record_submission()
            run.last_batch_id, run.last_offsets = committed, offsets
            self._clear_stale_control_files()
            self.heartbeat.write_status()
            record["after"] = {"generation": run.generation, "batch_id": committed,
                               "starting_offsets": run.starting_offsets if committed is None else None}
        log.info("job %s: generation %04d at %s, %s", self.config.job_name, run.generation,
                 run.checkpoint_location,
                 f"resuming after batch {committed}" if committed is not None else f"starting at {run.starting_offsets}")
        self.committer.start()
        self.heartbeat.start()
        # Set only now: a start refused or failed above is done again in full when retried.
        run.prepared = True

    def _await_go_release(self) -> None:
        """A standby sees its go while the upgrade's go operation still holds the job lock (its history record is
        written after the go): look for the release every few milliseconds instead of the lock's own 0.2 s,
        since each look's delay is downtime (``standby-go`` is ``ops.standby.hand_over``'s operation, which this layer
        cannot import). Bounded; the lock itself then decides, as for any start."""
        if self.standby is None:
            return
        deadline = time.monotonic() + GO_RELEASE_WAIT_SECONDS
        while time.monotonic() < deadline and (self.home.read_lock() or {}).get("operation") == "standby-go":
            time.sleep(GO_RELEASE_POLL_SECONDS)

    def query_started(self) -> None:
        """A standby's query now runs as the job's: its record says when (a part of the handover's downtime)."""
        if self.standby is None or not self.standby.went:
            return
        try:
            self.standby.note_query_started()
        except Exception as exc:  # noqa: BLE001 - only a figure depends on it
            log.warning("could not note the query start in the standby record of %s: %s", self.home.url, exc)

    def _choose_generation(self) -> tuple[int, str]:
        gen = self.home.current_generation()
        if gen is None:
            given = self.config.starting_offsets
            try:
                recorded: Any = json.loads(given)
            except ValueError:
                recorded = given
            gen, _ = self.home.new_generation("submit", start_offsets=recorded)
            return gen, given
        info = self.home.generation_info(gen) or {}
        start = info.get("start_offsets")
        if info.get("reason") != "submit" and isinstance(start, Mapping):
            # The control plane made this generation to start at given offsets (restore, reset).
            return gen, json.dumps(start, separators=(",", ":"), sort_keys=True)
        return gen, self.config.starting_offsets

    def _refuse_second_driver(self) -> None:
        """Two drivers on one checkpoint corrupt it: refuse to start while another one heart-beats.

        Liveness is the one rule (``core.liveness``): a fresh heartbeat written from this host by a driver whose
        Python process and JVM are gone (a ``kill -9``) is no driver and is not waited out; one from another
        host is, since its pids mean nothing here.
        """
        status = st.read_status(self.home.url, self.config.storage_options)
        document = StatusDocument.parse(status)
        if document is None or (document.pid, document.host) == (os.getpid(), socket.gethostname()):
            return
        found = st.observe_liveness(status, time.time(),
                                    self.config.heartbeat_seconds * STALE_AFTER_INTERVALS)
        if found.life is Life.GONE:
            log.warning("job %s: the driver that wrote its status (pid %s, heartbeat %s) is gone; starting",
                        self.config.job_name, document.pid, document.heartbeat_text)
        if found.alive:
            raise JobStateError(
                f"job {self.config.job_name} already runs (status {document.state_text}, pid {document.pid} on "
                f"{document.host}, heartbeat {document.heartbeat_text}); two drivers on one checkpoint "
                f"corrupt it. Stop it first with the stop operation on job home {self.home.url}"
            )

    def _record_submission(self) -> None:
        """job.json: what runs in this home, so operations need no repeated arguments (no secrets)."""
        spec = self.home.spec()
        sink = self.config.sink() or sink_from_spec(spec)
        spec.pop("sink_path", None)  # superseded by "sink": kind and path
        spec.update({
            "job": self.config.job_name,
            "version": self.config.app_version or spec.get("version"),
            "topics": list(self.config.topics),
            "subscribe_pattern": self.config.subscribe_pattern,
            "group": self.config.group_id,
            "kafka": {k: v for k, v in self.config.client_config().items() if not is_secret_key(k)},
            "sink": sink.to_json() if sink else None,
            "starting_offsets": self.config.starting_offsets,
            "updated_at": utc_now().isoformat(),
        })
        self.home.write_spec(spec)

    def _clear_stale_control_files(self) -> None:
        """A stop request or drain answer left by an earlier run must not stop this one."""
        for name in self.home.clear_stop_request():
            log.warning("removed %s left by an earlier run of job %s", name, self.config.job_name)
