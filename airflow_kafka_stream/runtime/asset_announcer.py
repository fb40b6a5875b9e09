"""The driver's side of a job's output asset: announce each complete event-time window to Airflow, once.

After each committed batch the runtime hands the batch's progress here (its event-time watermark, the oldest
event time it saw). A thread of its own works out the windows that watermark completes
(``core.asset_windows``) and posts one asset event per window through Airflow's REST API
(``runtime.airflow_api``), oldest first, recording each in ``control/assets.json`` once Airflow has it. The
query never waits for Airflow: an unreachable or refusing API is retried every ``retry_seconds`` (and at every
batch), its error is logged at WARNING and shown in the status (``assets.error``), and the windows wait.

A crash between a post and its record leaves the window marked ``posting``; the next driver asks Airflow for
the asset's recent events and records the window as announced when Airflow has it, so a window is announced
once, not twice.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.asset_windows import (
    OutputAsset,
    announced_through,
    complete_windows,
    event_extra,
    parse_time,
    partition_key,
)
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.runtime.airflow_api import AIRFLOW_API_ENV, AirflowApi
from airflow_kafka_stream.runtime.progress import BatchProgress
from airflow_kafka_stream.storage.jobhome import JobHome

log = logging.getLogger(__name__)


NO_API = (f"no Airflow API to announce to: the driver was given none ({AIRFLOW_API_ENV}); define the Airflow "
          "connection [airflow_kafka_stream] airflow_api_conn_id names (default airflow_api), then restart the job")


class AssetAnnouncer:
    """Announces the complete windows of ``asset`` for the job home ``home`` through ``api`` (None: counted and
    shown as waiting, with the reason, until a driver with an API runs)."""

    def __init__(self, asset: OutputAsset, home: JobHome, job_name: str, api: AirflowApi | None,
                 retry_seconds: float = 30.0) -> None:
        self.asset, self.home, self.job_name, self.api = asset, home, job_name, api
        self.retry_seconds = retry_seconds
        #: ``control/assets.json`` as this driver knows it, read at its first batch (a standby's predecessor may
        #: announce windows until the handover).
        self._state: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._latest: tuple[datetime, int, int | None] | None = None
        self._asset_id: int | None = None
        self.error: str | None = None if api is not None else NO_API
        self.announced_this_run = 0
        self.pending = 0
        self._wake, self._closing = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="asset-announcer", daemon=True)
        if api is None:
            log.warning("job %s declares the output asset %s but %s", job_name, asset.uri, NO_API)

    # -- what the runtime calls ------------------------------------------------------------------
    def batch_committed(self, progress: BatchProgress, generation: int | None) -> None:
        """A batch committed: its watermark may complete windows (never called on the query's critical path
        for longer than a lock)."""
        with self._lock:
            if self._state is None:
                self._state = self._recorded()
                self._thread.start()
            if progress.event_time_min is not None and "first_event_time" not in self._state:
                self._state["first_event_time"] = progress.event_time_min.isoformat()
            if progress.watermark is not None:
                self._latest = (progress.watermark, progress.batchId, generation)
        self._wake.set()

    def _recorded(self) -> dict[str, Any]:
        """What the job home records as announced; another asset or window length starts again from this
        driver's batches."""
        recorded = self.home.announced_assets() or {}
        same = (recorded.get("uri") == self.asset.uri
                and recorded.get("every_seconds") == self.asset.every.total_seconds())
        return dict(recorded) if same else {}

    def document(self) -> dict[str, Any]:
        """The status's ``assets`` field: what was announced, what waits, and why."""
        with self._lock:
            state = self._state or {}
            return {**self.asset.describe(), "announced_through": state.get("announced_through"),
                    "last_partition_key": state.get("last_partition_key"),
                    "announced_this_run": self.announced_this_run, "waiting": self.pending, "error": self.error}

    def close(self, timeout: float) -> bool:
        """Announce what the last batches completed (bounded by ``timeout``), then end the thread."""
        self._closing.set()
        self._wake.set()
        if not self._thread.is_alive():
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait(self.retry_seconds if self.error and self.api is not None else None)
            self._wake.clear()
            try:
                self._announce()
            except Exception as exc:  # noqa: BLE001 - the stream goes on; the reason is logged and in the status
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning("job %s: announcing windows of %s failed, retrying in %.0f s: %s", self.job_name,
                            self.asset.uri, self.retry_seconds, self.error)
            if self._closing.is_set():
                return

    def _announce(self) -> None:
        with self._lock:
            state = dict(self._state or {})
        latest, first = self._latest, parse_time(state.get("first_event_time"))
        if latest is None or first is None:
            return
        watermark, batch_id, generation = latest
        done = complete_windows(self.asset.every, watermark, first_event=first,
                                announced_through=announced_through(state, self.asset))
        if done.skipped:
            log.warning("job %s: the watermark %s completes %d windows of %s at once; the oldest %d are not "
                        "announced", self.job_name, watermark.isoformat(), len(done.starts) + done.skipped,
                        self.asset.uri, done.skipped)
        self.pending = len(done.starts)
        if not done.starts or self.api is None:
            return
        asset_id = self._known_asset()
        posted = self._already_posted(asset_id, state.get("posting"))
        for start in done.starts:
            key = partition_key(start)
            self._record(posting=key)
            if key != posted:
                self.api.create_event(asset_id, key, event_extra(self.asset, start, job=self.job_name,
                                                                 watermark=watermark, batch_id=batch_id,
                                                                 generation=generation))
            self._record(announced_through=(start + self.asset.every).isoformat(), last_partition_key=key)
            self.announced_this_run += 1
            self.pending -= 1
            log.info("job %s: announced %s window %s to Airflow", self.job_name, self.asset.uri, key)
        self.error = None

    def _known_asset(self) -> int:
        if self._asset_id is None:
            found = self.api.asset_id(self.asset.uri)
            if found is None:
                raise StreamError(f"Airflow knows no asset {self.asset.uri!r}: a DAG must declare it (e.g. the "
                                  "downstream DAG scheduled on it) before its events can be posted")
            self._asset_id = found
        return self._asset_id

    def _already_posted(self, asset_id: int, posting: str | None) -> str | None:
        """The window a crashed driver was posting, when Airflow has its event (then it is not posted again)."""
        if not posting:
            return None
        return posting if posting in self.api.recent_partition_keys(asset_id) else None

    def _record(self, **changes: Any) -> None:
        with self._lock:
            assert self._state is not None  # the thread runs only once the state is read
            self._state.update({**self.asset.describe(), **changes})
            if "announced_through" in changes:
                self._state.pop("posting", None)
            document = dict(self._state)
        self.home.write_announced_assets(document)
