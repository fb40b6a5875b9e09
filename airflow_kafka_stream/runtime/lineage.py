"""The driver's OpenLineage events: START when it takes the job, RUNNING at a bounded rate, COMPLETE/FAIL/ABORT.

Made only when the OpenLineage client is configured its own way (``OPENLINEAGE_URL``, ``OPENLINEAGE_CONFIG``,
``OPENLINEAGE__TRANSPORT__*``, an ``openlineage.yml``; ``core.lineage.client_configured``); otherwise nothing
is imported and no thread runs. Events go out from one background thread through a bounded queue: a batch only
puts an event there (or drops it when the queue is full), so a slow, hanging or refusing endpoint never holds a
batch. Every failed or dropped event is logged at warning with its reason and counted (``LineageCounts``); the
end of the run waits at most ``CLOSE_TIMEOUT_SECONDS`` for the last event. A warm standby emits nothing until it
takes the job: START is emitted once its query runs as the job's.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.core.lineage import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_NAMESPACE,
    INTERVAL_ENV,
    NAMESPACE_ENV,
    PARENT_ENV,
    ROOT_PARENT_ENV,
    DatasetId,
    client_configured,
    due,
    end_event_type,
    job_datasets,
    offset_positions,
    parse_parent,
    topic_dataset,
)
from airflow_kafka_stream.core.offsets import PartitionOffsets
from airflow_kafka_stream.core.redaction import without_userinfo
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.runtime.config import StreamConfig
from airflow_kafka_stream.runtime.run_state import RunState

# Lazy imports: the OpenLineage client (runtime.lineage_events and the transport it configures) is imported only
# when the client is configured, so an unconfigured driver pays nothing for it.

log = logging.getLogger(__name__)

QUEUE_SIZE = 64
CLOSE_TIMEOUT_SECONDS = 3.0


def config_files(cwd: str | None = None) -> list[str]:
    """The ``openlineage.yml`` files the client would read by itself (the working directory, ``~/.openlineage``)."""
    paths = [os.path.join(cwd or os.getcwd(), "openlineage.yml"),
             os.path.join(os.path.expanduser("~/.openlineage"), "openlineage.yml")]
    return [path for path in paths if os.path.isfile(path)]


def interval_seconds(config: StreamConfig, env: Mapping[str, str]) -> float:
    """The least time between two RUNNING events: the config's, else ``AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL``."""
    value: Any = config.lineage_interval_seconds
    if value is None:
        value = env.get(INTERVAL_ENV) or DEFAULT_INTERVAL_SECONDS
    try:
        found = float(value)
    except (TypeError, ValueError):
        found = -1.0
    if not found > 0:
        raise InvalidInputError(f"the interval of RUNNING lineage events must be a positive number of seconds, got "
                                f"{value!r}: fix StreamConfig.lineage_interval_seconds or {INTERVAL_ENV}")
    return found


@dataclass
class LineageCounts:
    """What became of this run's events (logged at the end of the run)."""

    sent: int = 0
    failed: int = 0
    dropped: int = 0
    last_error: str | None = None


class LineageEmitter:
    """Sends events from one daemon thread; ``submit`` never waits."""

    def __init__(self, send: Callable[[Any], None], job_name: str, queue_size: int = QUEUE_SIZE) -> None:
        self._send = send
        self._job = job_name
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self.counts = LineageCounts()
        self._abandoned = threading.Event()  # set by a close that timed out: what is still queued is dropped
        self._thread = threading.Thread(target=self._run, name="openlineage-emitter", daemon=True)
        self._thread.start()

    def submit(self, event: Any) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.counts.dropped += 1
            log.warning("job %s: OpenLineage event %s dropped: %d events wait for a slow endpoint (%d dropped "
                        "so far)", self._job, _kind(event), self._queue.qsize(), self.counts.dropped)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            if self._abandoned.is_set():  # the run ended without it: the send that was in flight was the last
                self.counts.dropped += 1
                if self._queue.empty():
                    return
                continue
            try:
                self._send(event)
                self.counts.sent += 1
            except Exception as exc:  # noqa: BLE001 - lineage never stops the job; counted and logged
                self.counts.failed += 1
                self.counts.last_error = without_userinfo(f"{type(exc).__name__}: {exc}")[:300]
                log.warning("job %s: OpenLineage event %s not sent: %s", self._job, _kind(event),
                            self.counts.last_error)

    def close(self, timeout: float = CLOSE_TIMEOUT_SECONDS) -> bool:
        """Send what is queued, waiting at most ``timeout``; True when everything was handed to the transport."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._queue.put(None, timeout=max(deadline - time.monotonic(), 0.01))
                break
            except queue.Full:
                if time.monotonic() >= deadline:
                    break
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        if not self._thread.is_alive():
            return True
        # The endpoint did not take the events within the bound: drop what is still queued, so the thread ends
        # with the send in flight (its transport's retries) instead of trying every queued event after the run.
        self._abandoned.set()
        return False

    @property
    def alive(self) -> bool:
        """The thread still sends (a close that timed out leaves it only for the send in flight)."""
        return self._thread.is_alive()


def _kind(event: Any) -> str:
    kind = getattr(event, "eventType", None)
    return str(getattr(kind, "value", kind))


class RuntimeLineage:
    """A component of ``StreamRuntime``: this driver run's events (one run id, the job's one name)."""

    def __init__(self, config: StreamConfig, env: Mapping[str, str], spark_version: str | None,
                 send: Callable[[Any], None] | None = None) -> None:
        from airflow_kafka_stream.runtime import lineage_events

        self._events = lineage_events
        self._interval = interval_seconds(config, env)  # refused (named) before anything runs
        self._config = config
        self._inputs, self._outputs = job_datasets({}, config.topics, config.sink_path, config.bootstrap_servers)
        self.job = lineage_events.JobIdentity(
            namespace=env.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE, name=config.job_name,
            parent=parse_parent(env.get(PARENT_ENV), env.get(ROOT_PARENT_ENV)), spark_version=spark_version)
        if env.get(PARENT_ENV) and self.job.parent is None:
            log.warning("job %s: %s=%r is not namespace/job/runId with a UUID run id; the lineage run names no "
                        "parent", config.job_name, PARENT_ENV, env.get(PARENT_ENV))
        self.run_id = _new_run_id()
        self.emitter = LineageEmitter(send or _client_send(), config.job_name)
        self.started = False
        self._last_running: float | None = None

    @classmethod
    def from_env(cls, config: StreamConfig, spark_version: str | None, run: RunState | None = None,
                 env: Mapping[str, str] | None = None) -> RuntimeLineage | None:
        """The component when the OpenLineage client is configured, else None (nothing imported, no thread); it
        shows itself in ``run``'s status (``lineage``)."""
        env = os.environ if env is None else env
        if not client_configured(env, config_files()):
            return None
        interval_seconds(config, env)  # our own setting: a bad value is refused, not worked around
        try:
            made = cls(config, env, spark_version)
        except Exception as exc:  # noqa: BLE001 - the client's own configuration: the job runs without lineage
            log.warning("job %s: OpenLineage is configured but its client could not be made (%s: %s); the job "
                        "runs without lineage events", config.job_name, type(exc).__name__, exc)
            return None
        if run is not None:
            run.status_parts["lineage"] = made.status_field  # closed by the runtime's end(), not a closer
        return made

    def status_field(self) -> dict[str, Any]:
        """The status document's ``lineage``: this run's id, its job, and what became of its events so far."""
        counts = self.emitter.counts
        return {"namespace": self.job.namespace, "job": self.job.name, "run_id": self.run_id, "sent": counts.sent,
                "failed": counts.failed, "dropped": counts.dropped, "last_error": counts.last_error}

    def _inputs_for(self, offsets: PartitionOffsets | None) -> list[DatasetId]:
        seen = [topic_dataset(self._config.bootstrap_servers, topic) for topic in offset_positions(offsets)]
        return self._inputs + [d for d in seen if d not in self._inputs]

    def _emit(self, kind: str, offsets: PartitionOffsets | None = None, batch_id: int | None = None,
              error: str | None = None) -> None:
        try:
            event = self._events.run_event(kind, self.run_id, self.job, self._inputs_for(offsets), self._outputs,
                                           offset_positions(offsets) if offsets else None, batch_id, error)
        except Exception as exc:  # noqa: BLE001 - called from the run and the batch listener: lineage never stops it
            self.emitter.counts.failed += 1
            self.emitter.counts.last_error = f"building the {kind} event: {type(exc).__name__}: {exc}"[:300]
            log.warning("job %s: OpenLineage %s event not built: %s", self._config.job_name, kind, exc)
            return
        self.emitter.submit(event)

    def start(self, offsets: PartitionOffsets | None, batch_id: int | None) -> None:
        """START: this driver runs the job's query now (after its take; a standby's after its go)."""
        self.started = True
        self._emit("START", offsets, batch_id)

    def batch(self, batch_id: int, offsets: PartitionOffsets) -> None:
        """RUNNING with the job's position, at most once per interval."""
        now = time.monotonic()
        if self.started and due(now, self._last_running, self._interval):
            self._last_running = now
            self._emit("RUNNING", offsets, batch_id)

    def end(self, offsets: PartitionOffsets | None, batch_id: int | None, error: str | None,
            aborted: bool) -> None:
        """The run's last event (only after a START), then the emitter closed within its bound; ``aborted``: the
        run was superseded or its query stopped at once."""
        if self.started:
            self._emit(end_event_type(error is not None, aborted), offsets, batch_id, error)
        done = self.emitter.close(CLOSE_TIMEOUT_SECONDS)
        counts = self.emitter.counts
        (log.info if done and not counts.failed else log.warning)(
            "job %s: OpenLineage events of run %s: %d sent, %d failed, %d dropped%s%s", self._config.job_name,
            self.run_id, counts.sent, counts.failed, counts.dropped,
            "" if done else f"; the last ones not sent within {CLOSE_TIMEOUT_SECONDS:g}s are dropped",
            f"; last error: {counts.last_error}" if counts.last_error else "")


def _new_run_id() -> str:
    from openlineage.client.uuid import generate_new_uuid

    return str(generate_new_uuid())


def _client_send() -> Callable[[Any], None]:
    """The configured client's transport: the client's own ``emit`` swallows nothing, the transport raises."""
    from openlineage.client import OpenLineageClient

    client = OpenLineageClient()
    return client.emit
