"""The driver side of a warm standby: register, warm up, report ready, wait for the go, take over.

A driver started with :data:`STANDBY_ENV` set (to the token the control plane wrote in
``control/standby.json`` when it launched it, see ``ops.standby``) does not take the job when its
:class:`~airflow_kafka_stream.runtime.StreamRuntime` prepares. It first stands by: it registers in
its own record, does what takes time and touches nothing of the running job (the JVM and session are up
already, its code is imported; the source is loaded, the job home and savepoints are read), reports
READY and waits. Only the go written for its token by an upgrade that stopped the old version lets it
take the job (lock, generation, status.json) and start its query. The job's checkpoint, group, status
and lock stay untouched until then: a standby that fails or is ended costs the running job nothing.

An upgrade's standby never takes over on its own: when the old version stops by itself (a crash, another
operator) it notes so in its record and keeps waiting for an explicit go. It gives up after ``max_wait_seconds``.

A hot standby (its record says ``hot``, see ``ops.hot_standby``) is a standby of the running version kept
beside the job with no deadline: it looks at the job every :data:`FAILOVER_LOOK_SECONDS` and gives itself the
go when the watchdog's rules say the driver is dead and the restart budget allows (``core.failover``); it
stands down when the job was stopped on purpose. Its takeover is recorded as a ``failover`` in the history.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core import failover
from airflow_kafka_stream.core import standby as rules
from airflow_kafka_stream.core.standby import STANDBY_ENV
from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.core.watchdog import restarts_in
from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.runtime.session import ExecutorGrace, is_local
from airflow_kafka_stream.storage import status as st
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation
from airflow_kafka_stream.storage.processes import driver_gone, end_process, process_alive

log = logging.getLogger(__name__)

#: Set by the control plane in a standby driver's environment: the token of its record.

#: How often a ready standby looks for its go: it is downtime, so often (a small local read).
GO_POLL_SECONDS = 0.1
#: How often a hot standby looks whether the job's driver is dead: each look reads status.json (and the
#: history only when the driver looks dead).
FAILOVER_LOOK_SECONDS = 0.5
#: A hot standby's wait for the go has no deadline; this stands for it where a number is needed (ten years).
HOT_WAIT_SECONDS = 10 * 365 * 86400.0


def utc_now() -> datetime:
    return datetime.now(UTC)


class Standby:
    """One standby driver's record and its wait for the go."""

    def __init__(self, home: JobHome, token: str, version: str | None, heartbeat_seconds: float,
                 max_wait_seconds: float = 3600.0) -> None:
        self.home = home
        self.token = token
        self.version = version
        self.heartbeat_seconds = heartbeat_seconds
        self.max_wait_seconds = max_wait_seconds
        self.went = False
        #: Set when this hot standby gave itself the go: what it found (the dead driver, when it last beat).
        self.failover: dict[str, Any] | None = None
        self._doc: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_env(cls, home: JobHome, version: str | None, heartbeat_seconds: float, max_wait_seconds: float,
                 environ: Mapping[str, str] | None = None) -> Standby | None:
        token = (environ if environ is not None else os.environ).get(STANDBY_ENV)
        return cls(home, token, version, heartbeat_seconds, max_wait_seconds) if token else None

    # -- the standby's life ------------------------------------------------------------------------
    def stand_by(self, warm_up: Callable[[], None]) -> dict[str, Any]:
        """Register, warm up, report READY, wait for the go; returns the go. Raises when refused or ended."""
        self._register()
        try:
            started = time.monotonic()
            warm_up()
            self._update(rules.StandbyState.READY, ready_at=utc_now().isoformat(), warm_up_seconds=round(time.monotonic() - started, 3))
            log.info("standby of version %s for %s is READY after %.1fs of warm-up; waiting for the go",
                     self.version, self.home.url, time.monotonic() - started)
            go = self._wait_for_go()
        except BaseException as exc:
            if self._doc.get("state") in rules.LIVE_STATES:
                self.end(rules.StandbyState.FAILED if not isinstance(exc, _Ended) else rules.StandbyState.ENDED, str(exc))
            raise
        self.went = True
        self._update(rules.StandbyState.TAKING_OVER, go_at=go.get("at"), go_by=go.get("by"), go_seen_at=utc_now().isoformat())
        log.info("standby of version %s for %s: go by %s, taking over", self.version, self.home.url, go.get("by"))
        return go

    @property
    def hot(self) -> bool:
        """A hot standby of the running version (not an upgrade's): it takes over when the driver dies."""
        return rules.is_hot(self._doc)

    @property
    def wait_seconds(self) -> float:
        """How long this standby waits for its go (a hot standby: as long as the job runs)."""
        return HOT_WAIT_SECONDS if self.hot else self.max_wait_seconds

    def rehearsal_request(self) -> dict[str, Any]:
        """What the upgrade that launched this standby asked of its rehearsal (``drop_state``, ``check``,
        ``timeout_seconds``), as its launch record says; empty for a standby launched without one."""
        asked = self._doc.get("rehearse")
        return dict(asked) if isinstance(asked, Mapping) else {}

    def note_rehearsal(self, result: Mapping[str, Any]) -> None:
        """The rehearsal's verdict, in the record the control plane reads."""
        with self._lock:
            self._doc["rehearsal"] = dict(result)
            self._write_locked()

    def took_over(self) -> None:
        """The driver holds the job now (its status is status.json): the record ends ACTIVE; a hot standby's
        takeover is recorded as a failover, saying how long the job was without a driver."""
        self.end(rules.StandbyState.ACTIVE, None)
        self.home.clear_standby_go()
        if self.failover is not None:
            record_failover(self.home, self.failover, self.version)

    def note_query_started(self) -> None:
        """When the query this standby built started as the job's (after ``took_over``): the last step of the
        handover the upgrade benchmark reports (go seen, job taken, query started, first batch)."""
        with self._lock:
            self._doc["query_started_at"] = utc_now().isoformat()
            self._write_locked()

    def note_started_ahead(self) -> None:
        """The query this standby started before its go is the job's query (it skipped its start after the go)."""
        with self._lock:
            self._doc["started_ahead"] = True
            self._write_locked()

    def fail_early(self, error: str) -> None:
        """The job's code failed before the warm-up (while building its query, or refused it): register if not yet
        done and end FAILED with ``error``, so the upgrade that launched this standby fails before its stop saying
        why, not "the process exited"."""
        if self._doc.get("state") in rules.FINAL_STATES:
            return  # stand_by already said how it ended
        try:
            if not self._doc:
                self._register()
        except Exception as exc:  # noqa: BLE001 - e.g. another live standby: its record is not ours to write
            log.error("standby of %s failed (%s) and could not say so in its record: %s", self.home.url, error, exc)
            return
        self.end(rules.StandbyState.FAILED, error)

    def end(self, state: str, error: str | None) -> None:
        """Write the final record and stop the heartbeat."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self._update(state, error=error[:2000] if error else None, ended_at=utc_now().isoformat())
        except Exception as exc:  # noqa: BLE001 - the caller's own error matters more
            log.error("could not write the %s record of the standby of %s: %s", state, self.home.url, exc)

    # -- steps -------------------------------------------------------------------------------------
    def _register(self) -> None:
        """Refuse while another standby is live; else make the record ours (STARTING) and start beating."""
        found = self.home.standby_record()
        now = utc_now()
        ours = found is not None and found.get("token") == self.token
        if found and not ours and rules.is_live(found, process_alive(found.get("pid"), found.get("host")), now):
            raise JobStateError(
                f"job home {self.home.url} already has a live {rules.describe(found)}: two standbys for one job "
                "are refused (only one can take over). Let its upgrade finish, or end it with the upgrade that "
                "started it, then start this one again")
        if ours and found.get("state") in rules.FINAL_STATES:
            raise JobStateError(f"this standby of job home {self.home.url} was {found.get('state')} before it "
                                f"registered ({found.get('error') or 'no reason given'}); nothing was changed")
        self._doc = {
            **(found if ours else {}),
            "token": self.token,
            "version": self.version,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "registered_at": now.isoformat(),
            "heartbeat_interval_seconds": self.heartbeat_seconds,
            "note": None,
            "error": None,
        }
        self._update(rules.StandbyState.STARTING)
        self._thread = threading.Thread(target=self._beat, name="standby-heartbeat", daemon=True)
        self._thread.start()

    def _wait_for_go(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.wait_seconds
        next_look = 0.0
        while True:
            go = self.home.standby_go()
            if go and go.get("token") == self.token:
                if go.get("action") == rules.GO:
                    return go
                raise _Ended(f"ended by {go.get('by') or 'the control plane'}: {go.get('reason') or 'cancelled'}")
            if time.monotonic() >= deadline:
                raise _Ended(f"no go within {self.max_wait_seconds:.0f}s: the standby gave up waiting")
            if time.monotonic() >= next_look:
                if self.hot:
                    go = self._look_for_failover()
                    if go is not None:
                        return go
                    next_look = time.monotonic() + FAILOVER_LOOK_SECONDS
                else:
                    self._note_job_state()
                    next_look = time.monotonic() + self.heartbeat_seconds
            time.sleep(GO_POLL_SECONDS)

    def _look_for_failover(self) -> dict[str, Any] | None:
        """One look of a hot standby at the job (``core.failover``): its own go when the driver is dead and the
        budget allows; raises (the standby ends) when the job was stopped on purpose or recovery gave up."""
        policy = rules.hot_policy(self._doc["hot"])
        now = utc_now()
        document = self.home.status_document()
        gone = driver_gone(document)

        def judged(restarts: list) -> failover.FailoverDecision:
            return failover.judge_failover(document, stop_requested=self.home.stop_requested(), restarts=restarts,
                                           now=now, policy=policy, processes_gone=gone)

        decision = judged([])  # the history and job.json are read only when the driver looks dead
        looks_dead = decision.verdict is failover.Verdict.TAKE_OVER
        if looks_dead:  # the budget's limits as the supervisor or the watchdog last recorded them with the wish
            policy = rules.hot_policy(self.home.spec().get(rules.HOT_STANDBY_SPEC_KEY) or self._doc["hot"])
            decision = judged(restarts_in(self.home.history()))
        if decision.verdict is failover.Verdict.STAND_DOWN:
            raise _Ended(f"stood down: {decision.reason}")
        if decision.verdict is failover.Verdict.WAIT:
            note = decision.reason if looks_dead else None  # the budget's backoff holds it back
            if note != self._doc.get("note"):
                if note:
                    log.warning("hot standby of %s: %s", self.home.url, note)
                with self._lock:
                    self._doc["note"] = note
            return None
        assert document is not None  # a job that never reported is not dead
        if gone is False:  # frozen on this host: it would resume mid-write, so it is ended before the take
            for pid in (document.pid, document.jvm_pid):
                end_process(pid, document.host, grace_seconds=0.0, group=False)
        self.failover = {"reason": decision.reason, "decided_at": now.isoformat(), "dead_pid": document.pid,
                         "dead_host": document.host, "dead_heartbeat_epoch": document.heartbeat_epoch,
                         "dead_state": document.state_text, "restart_policy": asdict(policy)}
        log.warning("hot standby of %s: %s; taking the job over", self.home.url, decision.reason)
        return {"token": self.token, "action": rules.GO, "by": failover.FAILOVER, "at": now.isoformat()}

    def _note_job_state(self) -> None:
        """The job stopped without a go: say so (the standby does not take over without being told to)."""
        status = self.home.status()
        alive = st.observe_liveness(status, time.time()).alive
        document = StatusDocument.parse(status)
        note = None if alive else (
            f"the job no longer runs (state {document.state_text if document else None}) but no go was given: "
            "this standby does not take over without one (an upgrade gives it after stopping the old version)")
        if note != self._doc.get("note"):
            if note:
                log.warning("standby for %s: %s", self.home.url, note)
            with self._lock:
                self._doc["note"] = note

    # -- the record ----------------------------------------------------------------------------------
    def _update(self, state: str, **fields: Any) -> None:
        with self._lock:
            self._doc.update(fields, state=state)
            self._write_locked()

    def _write_locked(self) -> None:
        now = utc_now()
        self._doc.update(heartbeat=now.isoformat(), heartbeat_epoch=now.timestamp())
        self.home.write_standby_record(self._doc)

    def _beat(self) -> None:
        while not self._closing.wait(self.heartbeat_seconds):
            try:
                with self._lock:
                    if self._closing.is_set():
                        return
                    self._write_locked()
            except Exception as exc:  # noqa: BLE001 - a hiccup; the control plane judges staleness
                log.warning("writing the standby record of %s failed: %s", self.home.url, exc)


#: Records per partition a rehearsal reads back from the running job's position.
REHEARSAL_RECORDS = 20


def rehearse(spark, source_format: str, source_options: Mapping[str, str], last_offsets: Any,
             timeout: float = 300.0) -> float:
    """Run the source once into a scratch folder, on a scratch checkpoint; returns the seconds it took.

    The first query of a session pays for what the next ones do not: the Python process serving the
    source, the Python workers reading it, Arrow, code generation and the first file write (measured on
    this project's example pipeline: its first batch costs several times its third). A standby pays it
    here, before it is READY, by reading the last few records before the running job's position (its
    ``last_offsets``, read from status.json) into a local temporary folder, one batch (an empty topic: none,
    until ``timeout``). Nothing of the job is written:
    not its checkpoint, not its group (only the runtime commits to the group), not its output.
    """
    started = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="standby-rehearsal-")
    options = {k: v for k, v in source_options.items() if k not in ("drainPath", "startOffsetsPath")}
    options["startingOffsets"] = _behind(last_offsets, REHEARSAL_RECORDS) or "latest"
    if options["startingOffsets"] == "latest" or options["startingOffsets"] == _behind(last_offsets, 0):
        timeout = min(timeout, 10.0)  # nothing to read back: a batch comes only if records arrive meanwhile
    options["failOnDataLoss"] = "false"  # records before the position may have been deleted meanwhile
    local = is_local(spark)

    def write(batch_df, batch_id: int) -> None:
        if local:
            batch_df.write.mode("overwrite").parquet(f"{scratch}/out")
        else:  # executors of a cluster cannot write to this driver's temporary folder
            batch_df.write.format("noop").mode("overwrite").save()

    partitions = sum(len(parts) for parts in last_offsets.values()) if isinstance(last_offsets, Mapping) else 1
    options["maxOffsetsPerTrigger"] = str(REHEARSAL_RECORDS * max(1, partitions))  # however far behind the job is
    query = None
    try:
        query = (spark.readStream.format(source_format).options(**options).load().writeStream
                 .foreachBatch(write).option("checkpointLocation", f"{scratch}/checkpoint").start())
        deadline = time.monotonic() + timeout
        grace = ExecutorGrace(spark)
        while query.isActive and time.monotonic() < deadline and not _executed_a_batch(query):
            if grace.ran_out():
                log.warning(
                    "the standby got no executor in %.0fs: the running version holds the cluster's cores. It is "
                    "READY with its driver warm, and its executors start with its query at the handover; give "
                    "the cluster room for both applications (e.g. spark.cores.max) to warm them too",
                    grace.seconds)
                break
            query.awaitTermination(0.1)
        failure = query.exception()
        if failure is not None:
            raise JobStateError(f"the standby's rehearsal of its source failed: {failure}")
    finally:
        if query is not None and query.isActive:
            query.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return time.monotonic() - started


def _executed_a_batch(query) -> bool:
    return any("commitOffsets" in (progress["durationMs"] or {}) for progress in query.recentProgress)


def _behind(offsets: Any, records: int) -> str | None:
    """Offsets JSON ``records`` before ``offsets`` (a status's ``last_offsets``) on every partition."""
    if not isinstance(offsets, Mapping) or not offsets:
        return None
    try:
        return json.dumps({topic: {part: max(0, int(off) - records) for part, off in parts.items()}
                           for topic, parts in offsets.items()}, separators=(",", ":"), sort_keys=True)
    except (AttributeError, TypeError, ValueError):
        return None


def record_failover(home: JobHome, found: Mapping[str, Any], version: str | None) -> None:
    """The history record of a hot standby's takeover (a restart of the shared budget): who died, and how long
    the job was without a driver (from the dead driver's last heartbeat, the last moment it is known to have
    lived, to this driver holding the job)."""
    taken = utc_now()
    last_beat = found.get("dead_heartbeat_epoch")
    without = round(taken.timestamp() - last_beat, 3) if isinstance(last_beat, int | float) else None
    args = {"restarter": failover.FAILOVER, "version": version, "reason": found.get("reason"),
            "dead_pid": found.get("dead_pid"), "dead_host": found.get("dead_host")}
    try:
        with recorded_operation(home, failover.FAILOVER_OPERATION, args,
                                by=f"hot standby {socket.gethostname()}:{os.getpid()}", lock=False) as record:
            record["after"] = {"pid": os.getpid(), "host": socket.gethostname(), "decided_at": found.get("decided_at"),
                               "taken_at": taken.isoformat(), "without_driver_seconds": without,
                               "dead_state": found.get("dead_state")}
    except Exception as exc:  # noqa: BLE001 - the job runs; only its history misses the record, said loudly
        log.error("hot standby of %s took the job over but could not record the failover: %s", home.url, exc)
    log.warning("hot standby of %s took the job over; it was without a driver for %ss", home.url, without)


class _Ended(JobStateError):
    """The standby was cancelled or gave up: it ends ENDED (not FAILED)."""
