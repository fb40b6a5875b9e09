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
* started as a warm standby (``spark.standby.STANDBY_ENV`` set by an upgrade), the
  runtime first warms up and waits for the upgrade's go, touching nothing of the
  running job, and only then takes the job (see ``spark/standby.py``).

A job stays short; the ``with`` block reports a failure while the query is being
built (after ``read_stream``) as FAILED instead of leaving a STARTING heartbeat::

    with StreamRuntime(spark, home_url, StreamConfig(job_name="orders", ...)) as runtime:
        events = runtime.read_stream()
        writer = events.selectExpr(...).writeStream.foreachBatch(write)
        result = runtime.run(writer)
    sys.exit(result.exit_code)
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.errors import StreamingQueryException

from airflow_kafka_stream.checkpoint.reader import read_position
from airflow_kafka_stream.checkpoint.writer import recover_incomplete_append
from airflow_kafka_stream.core.liveness import Life
from airflow_kafka_stream.core.offsets import PartitionOffsets, parse_offsets_json, to_nested
from airflow_kafka_stream.core.redaction import is_secret_key, redact_text, secret_values
from airflow_kafka_stream.core.sink import resolve_sink, sink_from_spec
from airflow_kafka_stream.core.standby import FAILED as STANDBY_FAILED
from airflow_kafka_stream.errors import CheckpointFormatError, InvalidInputError, JobStateError
from airflow_kafka_stream.kafka.clients import check_client_config
from airflow_kafka_stream.ops.operation import recorded_operation
from airflow_kafka_stream.spark.group_committer import GroupCommitter, KafkaGroupCommit
from airflow_kafka_stream.spark.lag_sampler import LagSampler
from airflow_kafka_stream.spark.source import placement_of
from airflow_kafka_stream.spark.source_options import parse_source_options
from airflow_kafka_stream.spark.standby import Standby, rehearse
from airflow_kafka_stream.storage import status as st
from airflow_kafka_stream.storage.files import read_json, url_to_fs
from airflow_kafka_stream.storage.jobhome import STOP_MODE_KILL, JobHome

log = logging.getLogger(__name__)

SOURCE_FORMAT = "kafka_stream"
#: How long a starting driver waits for a control-plane operation that holds the job lock to finish.
START_LOCK_WAIT_SECONDS = 30.0
EXIT_OK = 0
EXIT_FAILED = 1


@dataclass
class StreamConfig:
    """What the runtime needs to know about the job; secrets go in ``kafka_options`` only.

    ``kafka_options`` are librdkafka settings without the ``kafka.`` prefix (they
    reach the source as ``kafka.<name>`` and the group committer as they are);
    ``source_options`` are further options of the ``kafka_stream`` source.
    """

    job_name: str
    bootstrap_servers: str
    group_id: str
    topics: list[str] = field(default_factory=list)
    subscribe_pattern: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    kafka_options: dict[str, Any] = field(default_factory=dict)
    source_options: dict[str, Any] = field(default_factory=dict)
    storage_options: dict[str, Any] = field(default_factory=dict)
    heartbeat_seconds: float = 5.0
    #: How far the clocks of this driver and of the hosts reading its status (Airflow workers, triggerers, the
    #: CLI) may be apart; every reader adds it before calling a heartbeat stale or a run older than a submit.
    clock_skew_seconds: float = 0.0
    stop_poll_seconds: float = 0.5
    #: A drain taking longer than this is logged and flagged in the status (``drain_overdue``). The
    #: runtime never cancels the batch on its own: whoever asked to stop withdraws or escalates to kill.
    drain_timeout_seconds: float = 300.0
    final_commit_timeout_seconds: float = 15.0
    app_version: str | None = None
    sink_path: str | None = None
    #: "file" (Spark's file sink, the default for a sink_path) or "idempotent" (output replaced per batch id);
    #: recorded in job.json, it decides what a reset or restore must keep whole (see core.sink).
    sink_kind: str | None = None
    #: A warm standby that gets no go within this long ends itself (its upgrade died or forgot it).
    standby_max_wait_seconds: float = 3600.0

    def validate(self) -> None:
        if not self.job_name:
            raise InvalidInputError("the job needs a name (StreamConfig.job_name); it appears in the status file")
        if not self.bootstrap_servers:
            raise InvalidInputError("bootstrap servers are required: set bootstrap_servers, e.g. host:9092")
        if not self.group_id:
            raise InvalidInputError("a consumer group is required for offset commits: set group_id")
        if bool(self.topics) == bool(self.subscribe_pattern):
            raise InvalidInputError("give exactly one of topics or subscribe_pattern")
        if self.heartbeat_seconds <= 0 or self.stop_poll_seconds <= 0 or self.drain_timeout_seconds <= 0:
            raise InvalidInputError("heartbeat, stop poll and drain timeout must be positive numbers of seconds")
        if not self.clock_skew_seconds >= 0:
            raise InvalidInputError(f"clock_skew_seconds must be 0 or more seconds, got {self.clock_skew_seconds!r}")
        check_client_config(self.client_config())  # the same refusal the control plane gives
        resolve_sink(None, self.sink_kind, self.sink_path)  # refuses an unknown kind or a file sink without path

    def client_config(self) -> dict[str, Any]:
        return {**self.kafka_options, "bootstrap.servers": self.bootstrap_servers}


@dataclass(frozen=True)
class RunResult:
    """How a run ended: what the job prints on stop and what its exit code is."""

    state: str
    exit_code: int
    batches: int
    records: int
    last_batch_id: int | None
    last_offsets: dict | None
    error: str | None = None
    note: str | None = None

    def summary(self) -> str:
        text = (f"{self.state}: {self.batches} batches, {self.records} records this run; "
                f"last committed batch {self.last_batch_id}, offsets {json.dumps(self.last_offsets)}")
        if self.note:
            text = f"{text}; {self.note}"
        return f"{text}; error: {self.error}" if self.error else text


#: How long the end of a run waits for progress events of batches the checkpoint already holds:
#: they carry the batches' record counts; past it, the batch is recorded from the checkpoint.
PROGRESS_GRACE_SECONDS = 2.0

#: Lag samples kept in the status file (one per batch of this run; a few KB).
LAG_SAMPLES = 120


def utc_now() -> datetime:
    return datetime.now(UTC)


def offsets_equal(left: Any, right: Any) -> bool:
    """Compare two Spark offsets JSON values as mappings (spacing and order do not matter)."""
    try:
        return left is not None and right is not None and parse_offsets_json(left) == parse_offsets_json(right)
    except (CheckpointFormatError, TypeError):
        return False


def batch_end_offsets(ends: list[Any]) -> PartitionOffsets | None:
    """The Kafka end offsets of one batch from its sources' ``endOffset`` values (None if no Kafka source)."""
    merged: PartitionOffsets = {}
    found = False
    for end in ends:
        if not end:
            continue
        try:
            merged.update(parse_offsets_json(end))
            found = True
        except CheckpointFormatError:
            continue  # not a Kafka source (e.g. a rate source joined in)
    return merged if found else None


def batch_backlog(sources: list[Mapping[str, Any]]) -> int | None:
    """Records waiting when a batch was planned: each Kafka source's ``latestOffset`` minus its ``startOffset``.

    The source reports the high watermarks it planned against (``reportLatestOffset``), so this is the
    job's lag at that moment, summed over partitions; None when no source reports both (a first batch
    has no start, a JVM source may report no latest).
    """
    total, found = 0, False
    for source in sources:
        try:
            start = parse_offsets_json(source.get("startOffset")) if source.get("startOffset") else None
            latest = parse_offsets_json(source.get("latestOffset")) if source.get("latestOffset") else None
        except CheckpointFormatError:
            continue
        if start is None or latest is None:
            continue
        total += sum(max(high - start.get(tp, high), 0) for tp, high in latest.items())
        found = True
    return total if found else None


def checkpoint_position(url: str, storage_options: dict | None = None
                        ) -> tuple[int | None, PartitionOffsets | None, bool]:
    """Last committed batch id, its Kafka offsets, and whether a later batch is in flight.

    A checkpoint location the query has not written yet (no ``metadata``) has no position.
    """
    fs, path = url_to_fs(url, storage_options)
    if not fs.exists(f"{path}/metadata"):
        return None, None, False
    pos = read_position(url, storage_options)
    in_flight = pos.in_flight_batch_id is not None
    if pos.batch_id is None:
        return None, None, in_flight
    kafka = pos.kafka_sources()
    # Every Kafka source together (a query may union readers); None when there is none.
    return pos.batch_id, (kafka.union() if kafka.by_index else None), in_flight


class _BatchListener:
    """Receives Spark's progress events (after ``commits/N`` is written) for one query.

    PySpark's own listener turns each event into Python objects field by field, about fifty
    py4j round trips per batch (measured: ~10 ms of driver CPU a batch, the largest part of the
    runtime's cost). This one takes the progress as one JSON string and reads the few fields
    it needs.
    """

    def __init__(self, on_batch: Callable[[Any], None]):
        from pyspark import SparkContext
        from pyspark.sql.streaming import StreamingQueryListener

        outer = self

        class ProgressJson:
            """Spark's Java listener interface, implemented over py4j."""

            def onQueryStarted(self, jevent):  # noqa: N802 - Spark's API
                pass

            def onQueryProgress(self, jevent):  # noqa: N802
                try:
                    outer.on_progress_json(jevent.progress().json())
                except Exception:  # a listener error must never disturb Spark's listener bus
                    log.exception("handling a progress event failed")

            def onQueryIdle(self, jevent):  # noqa: N802
                pass

            def onQueryTerminated(self, jevent):  # noqa: N802
                pass

            class Java:
                implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

        class Listener(StreamingQueryListener):
            """Registered through the public addListener; Spark calls ProgressJson."""

            @property
            def _jlistener(self):
                if not hasattr(self, "_jlistenerobj"):
                    self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(ProgressJson())
                return self._jlistenerobj

            def onQueryStarted(self, event):  # noqa: N802
                pass

            def onQueryProgress(self, event):  # noqa: N802
                pass

            def onQueryTerminated(self, event):  # noqa: N802
                pass

        self.on_batch = on_batch
        self.query_id: str | None = None
        self.listener = Listener()

    def on_progress_json(self, text: str) -> None:
        progress = progress_from_json(text)
        if self.query_id is not None and progress.id != self.query_id:
            return
        # Only executed batches time "commitOffsets", the write of commits/N.
        if "commitOffsets" not in progress.durationMs:
            return
        self.on_batch(progress)


@dataclass(frozen=True)
class BatchProgress:
    """The fields of a StreamingQueryProgress the runtime uses."""

    id: str
    batchId: int  # noqa: N815 - Spark's name
    numInputRows: int  # noqa: N815
    durationMs: dict[str, int]  # noqa: N815
    end_offsets: PartitionOffsets | None
    backlog: int | None = None


def progress_from_json(text: str) -> BatchProgress:
    """A progress event's JSON (``StreamingQueryProgress.json``) read into the fields the runtime uses."""
    data = json.loads(text)
    return BatchProgress(
        id=str(data["id"]),
        batchId=int(data["batchId"]),
        numInputRows=int(data.get("numInputRows") or 0),
        durationMs=dict(data.get("durationMs") or {}),
        end_offsets=batch_end_offsets([source.get("endOffset") for source in data.get("sources") or []]),
        backlog=batch_backlog(data.get("sources") or []),
    )


class StreamRuntime:
    """Runs one streaming query for a job home: generations, commits, status, graceful stop."""

    def __init__(self, spark, home_url: str, config: StreamConfig):
        config.validate()
        self.spark = spark
        self.config = config
        self._jvm_pid = _jvm_pid(spark)
        self.home = JobHome(home_url, config.storage_options)
        self._lock = threading.Lock()
        self._state = st.STARTING
        self._started_at = utc_now()
        self._stopped_at: datetime | None = None
        self._error: str | None = None
        self._query = None
        self._batches = 0
        self._records = 0
        self._last_batch_id: int | None = None
        self._last_offsets: PartitionOffsets | None = None
        self._dead_letters = 0
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
        self._status_thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._prepared = False
        self._finished: RunResult | None = None
        self._note: str | None = None
        self._drain_overdue = False
        self._fence_reason: str | None = None
        self._last_beat_ok = time.monotonic()
        self._last_request: dict[str, Any] | None = None
        self.generation: int | None = None
        self.checkpoint_location: str | None = None
        self.starting_offsets: str = config.starting_offsets
        self.committer = GroupCommitter(KafkaGroupCommit(config.client_config(), config.group_id))
        self.standby = Standby.from_env(self.home, config.app_version, config.heartbeat_seconds,
                                        config.standby_max_wait_seconds)

    # -- preparing ------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Pick (or create) the checkpoint generation, clear stale requests, start the heartbeat.

        A standby first waits for its go (warmed up, touching nothing of the running job).
        """
        if self._prepared:
            return
        standby = self.standby
        if standby is not None and not standby.went:
            standby.stand_by(self._warm_up)
            self._started_at = utc_now()  # this driver's run as the job's driver starts now
        try:
            self._take_job()
        except BaseException as exc:
            if standby is not None:
                standby.end(STANDBY_FAILED, f"taking over failed: {type(exc).__name__}: {exc}")
            raise
        if standby is not None:
            standby.took_over()

    def _warm_up(self) -> None:
        """A standby's work before READY: what takes time and touches nothing of the running job.

        The job home and its savepoints are read (a restore will need them), and the source runs once
        with the job's options into a scratch folder (see :func:`~airflow_kafka_stream.spark.standby.rehearse`).
        """
        self.home.require()
        if self.home.fs.exists(self.home.p("savepoints")):
            self.home.fs.ls(self.home.p("savepoints"))
        options = self._source_options(self.config.starting_offsets)
        seconds = rehearse(self.spark, SOURCE_FORMAT, options, (self.home.status() or {}).get("last_offsets"))
        log.info("job %s: the standby rehearsed its source in %.1fs", self.config.job_name, seconds)
        _BatchListener(self._on_batch)  # the listener's py4j classes

    def _take_job(self) -> None:
        # Under the job lock: a reset or restore in progress must finish first, and once the STARTING
        # heartbeat is written every control-plane operation sees this driver as running.
        args = {"job": self.config.job_name, "pid": os.getpid(), "host": socket.gethostname()}
        # A standby reads its go while the upgrade that wrote it still holds the lock: wait for brief holders.
        with recorded_operation(self.home, "start", args, by=f"driver {socket.gethostname()}:{os.getpid()}",
                                existing_home=False, lock_wait_seconds=START_LOCK_WAIT_SECONDS) as record:
            self._refuse_second_driver()
            self.generation, self.starting_offsets = self._choose_generation()
            self.checkpoint_location = self.home.checkpoint_url(self.generation)
            if recover_incomplete_append(self.checkpoint_location, self.config.storage_options):
                log.warning("job %s: completed or rolled back an interrupted offset reset before starting",
                            self.config.job_name)
            committed, offsets, _ = checkpoint_position(self.checkpoint_location, self.config.storage_options)
            self._record_submission()
            self._last_batch_id, self._last_offsets = committed, offsets
            self._clear_stale_control_files()
            self._write_status()
            record["after"] = {"generation": self.generation, "batch_id": committed,
                               "starting_offsets": self.starting_offsets if committed is None else None}
        log.info("job %s: generation %04d at %s, %s", self.config.job_name, self.generation,
                 self.checkpoint_location,
                 f"resuming after batch {committed}" if committed is not None else f"starting at {self.starting_offsets}")
        self.committer.start()
        self._last_beat_ok = time.monotonic()
        self._status_thread = threading.Thread(target=self._heartbeat_loop, name="status-heartbeat", daemon=True)
        self._status_thread.start()
        # Set only now: a start refused or failed above is done again in full when retried.
        self._prepared = True

    # -- the job's code between prepare and run ----------------------------------------------------
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
        if not status or (status.get("pid"), status.get("host")) == (os.getpid(), socket.gethostname()):
            return
        found = st.observe_liveness(status, time.time(),
                                    self.config.heartbeat_seconds * st.DEFAULT_STALE_AFTER_INTERVALS)
        if found.life is Life.GONE:
            log.warning("job %s: the driver that wrote its status (pid %s, heartbeat %s) is gone; starting",
                        self.config.job_name, status.get("pid"), status.get("heartbeat"))
        if found.alive:
            raise JobStateError(
                f"job {self.config.job_name} already runs (status {status.get('state')}, pid {status.get('pid')} on "
                f"{status.get('host')}, heartbeat {status.get('heartbeat')}); two drivers on one checkpoint "
                f"corrupt it. Stop it first with the stop operation on job home {self.home.url}"
            )

    def _record_submission(self) -> None:
        """job.json: what runs in this home, so operations need no repeated arguments (no secrets)."""
        spec = self.home.spec()
        sink = resolve_sink(None, self.config.sink_kind, self.config.sink_path) or sink_from_spec(spec)
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

    # -- the source -----------------------------------------------------------------------------
    def source_options(self) -> dict[str, str]:
        """Options for the ``kafka_stream`` source, including the drain handshake path."""
        self.prepare()
        options = self._source_options(self.starting_offsets)
        options["drainPath"] = self.home.control_url
        # The checkpoint keeps no record of where a fresh start began; the source writes it here.
        options["startOffsetsPath"] = self.home.url_of("generations", f"{self.generation:04d}.start.json")
        self._note_read_placement(options)
        return options

    def _note_read_placement(self, options: dict[str, str]) -> None:
        """Say once, in the log and the status, where this run reads its batches and why (readMode)."""
        placement = placement_of(parse_source_options(options)).to_dict()
        if placement != self._read_placement:
            self._read_placement = placement
            log.info("job %s: %s", self.config.job_name, placement["reason"])

    def _source_options(self, starting_offsets: str) -> dict[str, str]:
        options: dict[str, str] = {f"kafka.{k}": str(v) for k, v in self.config.client_config().items()}
        if self.config.topics:
            options["subscribe"] = ",".join(self.config.topics)
        else:
            options["subscribePattern"] = str(self.config.subscribe_pattern)
        options["startingOffsets"] = starting_offsets
        # startingOffsets=group reads the job's own group; source_options may still name another one.
        options["groupId"] = self.config.group_id
        if self.config.max_offsets_per_trigger:
            options["maxOffsetsPerTrigger"] = str(self.config.max_offsets_per_trigger)
        options.update({k: str(v) for k, v in self.config.source_options.items()})
        return options

    def read_stream(self):
        """A streaming DataFrame of the job's topics (Spark Kafka source columns)."""
        return self.spark.readStream.format(SOURCE_FORMAT).options(**self.source_options()).load()

    def add_dead_letters(self, count: int) -> None:
        """Count records sent to the dead-letter destination (shown in the status)."""
        with self._lock:
            self._dead_letters += count

    def spark_checkpoint_location(self) -> str:
        """The checkpoint's name for Spark's Hadoop file systems, which open it with the job's storage options.

        The job home is named for fsspec (a local path, ``s3://``); Spark needs ``file://`` (a bare path means
        the cluster's default file system) and ``s3a://``, and the same credentials and endpoint.
        """
        from airflow_kafka_stream.core.cluster import hadoop_settings, spark_url

        options = self.config.storage_options
        found = hadoop_settings(self.home.url, options)
        if found.unmapped:
            log.warning("job %s: storage option(s) %s have no Hadoop counterpart and do not reach Spark; set their "
                        "spark.hadoop.* equivalent in the Spark configuration", self.config.job_name,
                        ", ".join(found.unmapped))
        hadoop = self.spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in found.all.items():
            hadoop.set(key, value)
        return spark_url(str(self.checkpoint_location), options)

    # -- running --------------------------------------------------------------------------------
    def run(self, writer, query_name: str | None = None) -> RunResult:
        """Start the query from ``writer`` (a DataStreamWriter) and supervise it until it ends."""
        if self._finished is not None:
            raise JobStateError(f"job {self.config.job_name}: this runtime already ended ({self._finished.state}); "
                                "a StreamRuntime runs one query: create a new one to start again")
        self.prepare()
        batch_listener = _BatchListener(self._on_batch)
        self.spark.streams.addListener(batch_listener.listener)
        previous_handler = self._install_sigterm_handler()
        by_request = False
        try:
            if self._fence_reason is not None:
                raise JobStateError(self._fence_reason)
            if query_name:
                writer = writer.queryName(query_name)
            self._query = writer.option("checkpointLocation", self.spark_checkpoint_location()).start()
            batch_listener.query_id = str(self._query.id)
            self._set_state(st.RUNNING)
            by_request = self._supervise()
        except Exception as exc:  # noqa: BLE001 - recorded as FAILED in the status and the result
            self._record_error(exc)
        finally:
            if self._query is not None and self._query.isActive:
                self._query.stop()
            self._restore_sigterm_handler(previous_handler)
            self._remove_listener(batch_listener.listener)
        return self._finish(clear_request=by_request)

    def _supervise(self) -> bool:
        """Watch the query and the stop request; True when it stopped because it was asked to."""
        query = self._query
        draining_since: float | None = None
        while query.isActive:
            silent = time.monotonic() - self._last_beat_ok
            if self._fence_reason is None and silent >= st.FENCE_AFTER_INTERVALS * self.config.heartbeat_seconds:
                self._fence(silent, "the status write has not returned")  # a hung write fails nothing
            if self._fence_reason is not None:
                query.stop()  # usually done already by the heartbeat thread
                raise JobStateError(self._fence_reason)
            if self._signalled > 1:
                self._stop_now("a second SIGTERM")
                return True
            request = self._stop_request()
            if request is not None and request.get("mode") == STOP_MODE_KILL:
                self._stop_now(f"a kill request by {request.get('by') or 'unknown'}")
                return True
            if draining_since is None and request is not None:
                draining_since = time.monotonic()
                self._set_state(st.DRAINING)
                log.info("job %s: stop requested by %s, draining", self.config.job_name, self._stop_requested_by)
            elif draining_since is not None and request is None:
                draining_since = None
                self._withdrawn()
            if draining_since is not None:
                if self._drained():
                    query.stop()
                    return True
                self._check_drain_overdue(draining_since)
            try:  # returns as soon as the query ends, so an availableNow job exits without a poll's delay
                query.awaitTermination(self.config.stop_poll_seconds)
            except StreamingQueryException:
                pass  # the query failed: reported below from query.exception()
        if self._fence_reason is not None:
            raise JobStateError(self._fence_reason)
        exc = query.exception()
        if exc is not None:
            raise RuntimeError(f"the streaming query failed: {exc}")
        return draining_since is not None

    def _stop_now(self, why: str) -> None:
        """Stop the query without draining: Spark cancels the running batch and re-runs it on restart."""
        log.warning("job %s: %s: stopping now without draining", self.config.job_name, why)
        self._query.stop()
        # Ask the checkpoint after the stop: a batch may have started or finished meanwhile.
        committed, _, in_flight = self._position_or_unknown()
        self._note = (f"stopped at once on {why}: batch {committed + 1 if committed is not None else 0} was "
                      "cancelled; Spark re-runs it on restart" if in_flight else
                      f"stopped at once on {why}; no batch was in flight")

    def _position_or_unknown(self) -> tuple[int | None, PartitionOffsets | None, bool]:
        try:
            return checkpoint_position(self.checkpoint_location, self.config.storage_options)
        except Exception as exc:  # noqa: BLE001 - only used for the note
            log.warning("could not read the position of %s: %s", self.checkpoint_location, exc)
            return None, None, False

    def _withdrawn(self) -> None:
        """The stop request was withdrawn before the drain ended: plan new data again."""
        log.info("job %s: the stop request was withdrawn, running again", self.config.job_name)
        try:  # the source's old answer must not end a later drain early
            self.home.fs.rm(self.home.p("control", "drained.json"))
        except FileNotFoundError:
            pass
        with self._lock:
            self._stop_requested_at = self._stop_requested_by = None
            self._drain_overdue = False
        self._set_state(st.RUNNING)

    def _check_drain_overdue(self, draining_since: float) -> None:
        if self._drain_overdue or time.monotonic() - draining_since <= self.config.drain_timeout_seconds:
            return
        with self._lock:
            self._drain_overdue = True
        self._wake_status.set()
        log.warning("job %s: still draining %.0fs after the stop request: the running batch has not finished. "
                    "The job keeps draining; withdraw the request to keep it running, or stop it with "
                    "on_timeout kill", self.config.job_name, self.config.drain_timeout_seconds)

    def _stop_request(self) -> dict[str, Any] | None:
        """The standing stop request (``control/stop``), or None; SIGTERM writes one."""
        if self._signalled and not self.home.stop_requested():
            self.home.request_stop("SIGTERM")
        try:
            request = read_json(self.home.fs, self.home.p("control", "stop"))
        except (ValueError, UnicodeDecodeError):
            request = {}  # being written where rename is not atomic: it exists, read it next time
        except OSError as exc:  # a storage hiccup: keep the last answer, look again at the next poll
            log.warning("job %s: could not read the stop request: %s", self.config.job_name, exc)
            return self._last_request
        self._last_request = request if isinstance(request, dict) or request is None else {}
        if request is None:
            return None
        if not isinstance(request, dict):
            request = {}
        with self._lock:
            self._stop_requested_at = request.get("requested_at") or self._stop_requested_at or utc_now().isoformat()
            self._stop_requested_by = request.get("by") or "unknown"
        return request

    def _drained(self) -> bool:
        """The source answered "no new data" and every batch it planned has been committed."""
        try:
            drained = read_json(self.home.fs, self.home.p("control", "drained.json"))
        except (ValueError, UnicodeDecodeError):
            return False  # being written on a filesystem without atomic rename; look again
        if not drained or "offsets" not in drained:
            return False
        with self._lock:
            last = self._last_offsets
        if last is not None and offsets_equal(to_nested(last), drained["offsets"]):
            return True
        # The listener may lag behind Spark, or no batch ran in this run: ask the checkpoint.
        committed, offsets, in_flight = checkpoint_position(self.checkpoint_location, self.config.storage_options)
        if in_flight:
            return False
        if committed is None:
            return True  # no batch has ever run: nothing to finish
        if offsets is not None and offsets_equal(to_nested(offsets), drained["offsets"]):
            self._record_batch(committed, offsets, records=0, counted=False)
            return True
        return False

    def _catch_up_with_checkpoint(self) -> None:
        """Progress events arrive asynchronously and may trail the query's end: the checkpoint is the truth."""
        try:
            committed, offsets, _ = checkpoint_position(self.checkpoint_location, self.config.storage_options)
        except Exception as exc:  # noqa: BLE001 - the status keeps what the listener saw
            log.warning("could not read the final position of %s: %s", self.checkpoint_location, exc)
            return
        deadline = time.monotonic() + PROGRESS_GRACE_SECONDS
        while self._listener_behind(committed) and time.monotonic() < deadline:
            time.sleep(0.02)  # the last batch's progress event is usually a few milliseconds behind
        if self._listener_behind(committed) and offsets is not None:
            self._record_batch(committed, offsets, records=0, counted=False)

    def _listener_behind(self, committed: int | None) -> bool:
        with self._lock:
            return committed is not None and (self._last_batch_id is None or committed > self._last_batch_id)

    def _on_batch(self, progress: BatchProgress) -> None:
        offsets = progress.end_offsets
        if offsets is None:
            log.warning("batch %s has no Kafka offsets in its progress; nothing to commit", progress.batchId)
            return
        if progress.backlog is not None:
            self._add_lag_sample(progress.batchId, progress.backlog)
        else:
            self.lag_sampler.submit(progress.batchId, offsets)
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
        self.lag_sampler.close()
        failed = self._error is not None
        self._stopped_at = utc_now()
        self._state = st.FAILED if failed else st.STOPPED
        self._closing.set()
        self._wake_status.set()
        if self._status_thread is not None:
            self._status_thread.join(10)
        try:
            self._write_status()
        except Exception as exc:  # noqa: BLE001 - e.g. the storage outage that fenced the job
            log.error("could not write the final status %s of job %s: %s", self._state, self.config.job_name, exc)
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

    # -- signals and listeners ------------------------------------------------------------------
    def _install_sigterm_handler(self):
        if threading.current_thread() is not threading.main_thread():
            return None

        def on_sigterm(signum, frame):
            self._signalled += 1

        return signal.signal(signal.SIGTERM, on_sigterm)

    def _restore_sigterm_handler(self, previous) -> None:
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)

    def _remove_listener(self, listener) -> None:
        try:
            self.spark.streams.removeListener(listener)
        except Exception as exc:  # noqa: BLE001 - the session may already be gone
            log.debug("removing the progress listener failed: %s", exc)

    # -- status -----------------------------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        with self._lock:
            self._state = state
        self._wake_status.set()

    def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_seconds
        while not self._closing.is_set():
            wait = interval
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
                "application_id": _application_id(self.spark),
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
        return doc

    def _write_status(self) -> None:
        st.write_status(self.home.url, self.status(), self.config.storage_options)


def _jvm_pid(spark) -> int | None:
    """The pid of the driver's JVM (the process that writes the checkpoint), when Spark runs one here."""
    try:
        return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no JVM of their own
        return None


def _application_id(spark) -> str | None:
    try:
        return spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no SparkContext
        return None


def run_stream(spark, home_url: str, config: StreamConfig,
               build: Callable[[Any, StreamRuntime], Any], query_name: str | None = None) -> RunResult:
    """Read the job's topics, let ``build(df, runtime)`` return a DataStreamWriter, run it.

    An error raised by ``build`` ends the job FAILED (status written, heartbeat stopped) and propagates.
    """
    with StreamRuntime(spark, home_url, config) as runtime:
        return runtime.run(build(runtime.read_stream(), runtime), query_name=query_name)
