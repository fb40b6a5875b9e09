"""A job's home directory: the few facts every operation needs, kept together.

Layout (any fsspec URL)::

    <home>/job.json                what was submitted
    <home>/status.json             kept fresh by the running job
    <home>/control/stop            a request to drain and stop
    <home>/control/standby.json    the next version's warm standby driver, if any (see core.standby)
    <home>/control/standby-go.json the upgrade's go (or cancel) for that standby
    <home>/checkpoints/<NNNN>/     checkpoint generations; the current one is the highest with a record
    <home>/generations/<NNNN>.json how each generation started
    <home>/savepoints/<id>/        immutable savepoints
    <home>/history.jsonl           append-only record of every operation (object stores: with history/,
                                   one object a record until the lock holder folds them in)
    <home>/lock                    held by the control-plane operation in progress
    <home>/control/broken-locks/   tokens of locks broken by ``unlock`` (their holders must not release)
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.storage import history as history_log
from airflow_kafka_stream.storage.files import (
    check_url,
    create_exclusive,
    dump_json,
    is_local,
    read_json,
    unstrip,
    url_to_fs,
    write_atomic,
)
from airflow_kafka_stream.storage.processes import process_alive

GENERATION_WIDTH = 4
#: Where ``unlock`` leaves the token of each lock it broke, so that lock's holder never removes a later one.
BROKEN_LOCKS = ("control", "broken-locks")

#: Modes of a stop request (``control/stop``): finish the running batch first, or cancel it.
STOP_MODE_DRAIN = "drain"
STOP_MODE_KILL = "kill"

#: A warm standby's own record, and the go (or cancel) the control plane gives it.
STANDBY_RECORD = ("control", "standby.json")
STANDBY_GO = ("control", "standby-go.json")
#: How often a caller waiting for the job lock looks again.
LOCK_POLL_SECONDS = 0.2

log = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


def who_am_i() -> str:
    """The actor recorded in history and locks: user@host:pid (or AIRFLOW_CTX_* when in a task)."""
    user = os.environ.get("AIRFLOW_CTX_DAG_OWNER") or getpass.getuser()
    task = os.environ.get("AIRFLOW_CTX_DAG_ID")
    where = f"{socket.gethostname()}:{os.getpid()}"
    return f"{user}@{where}" + (f" (dag {task})" if task else "")


class JobHome:
    """Paths and small reads/writes of one job's home directory."""

    def __init__(self, url: str, storage_options: dict | None = None):
        if not url or not str(url).strip():
            raise InvalidInputError("job_home is empty; give the job's home directory as a path or URL",
                                    setting="job_home")
        check_url(url)  # before the trailing slashes go: "s3://" would become the local path "s3:"
        self.url = str(url).rstrip("/")
        self.storage_options = storage_options or {}
        self.fs, self.path = url_to_fs(self.url, self.storage_options)

    def __repr__(self) -> str:
        return f"JobHome({self.url!r})"

    # -- paths -----------------------------------------------------------------------------
    def p(self, *parts: str) -> str:
        """Path inside the home (filesystem-relative, no protocol)."""
        return "/".join([self.path, *parts])

    def url_of(self, *parts: str) -> str:
        """A URL of something in the home, to hand to Spark or another process."""
        return unstrip(self.fs, self.p(*parts)) if not is_local(self.fs) else self.p(*parts)

    @property
    def control_url(self) -> str:
        return self.url_of("control")

    def exists(self) -> bool:
        return self.fs.exists(self.path)

    def require(self) -> None:
        """Raise when the directory is not a job home (no job.json and no checkpoints)."""
        if not (self.fs.exists(self.p("job.json")) or self.fs.exists(self.p("checkpoints"))):
            raise InvalidInputError(
                f"{self.url} is not a job home: it has neither job.json nor checkpoints/; "
                "give as job_home the directory the job was started with", setting="job_home"
            )

    # -- job spec and status -----------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        return read_json(self.fs, self.p("job.json")) or {}

    def write_spec(self, spec: dict[str, Any]) -> None:
        write_atomic(self.fs, self.p("job.json"), dump_json(spec))

    def status(self) -> dict[str, Any] | None:
        """The running job's last status, or None when it has none yet (or it is unreadable)."""
        try:
            status = read_json(self.fs, self.p("status.json"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return status if isinstance(status, dict) else None

    # -- control requests ----------------------------------------------------------------------
    def request_stop(self, by: str, mode: str = STOP_MODE_DRAIN) -> None:
        """Ask the running job to stop: drain (finish the running batch) or kill (cancel it)."""
        write_atomic(self.fs, self.p("control", "stop"),
                     dump_json({"requested_at": utc_now().isoformat(), "by": by, "mode": mode}))

    def stop_requested(self) -> bool:
        return self.fs.exists(self.p("control", "stop"))

    def clear_stop_request(self) -> list[str]:
        """Remove the stop request and the source's drain answer; the names of those that existed."""
        removed = []
        for name in ("stop", "drained.json"):
            if self.fs.exists(self.p("control", name)):
                self.fs.rm(self.p("control", name))
                removed.append(name)
        return removed

    def read_control(self, name: tuple[str, ...]) -> dict[str, Any] | None:
        """A JSON document of the home (e.g. :data:`STANDBY_RECORD`), None when absent or not readable whole."""
        try:
            found = read_json(self.fs, self.p(*name))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return found if isinstance(found, dict) else None

    def write_control(self, name: tuple[str, ...], document: dict[str, Any]) -> None:
        write_atomic(self.fs, self.p(*name), dump_json(document))

    # -- checkpoint generations ----------------------------------------------------------------
    def generations(self) -> list[int]:
        """Complete checkpoint generations, ascending: those whose generations/NNNN.json exists.

        The record is written last, so a generation whose creation was interrupted
        (a restore killed mid-copy) never becomes current.
        """
        return sorted(n for n in self._numbers("generations", ".json"))

    def _numbers(self, directory: str, suffix: str = "") -> set[int]:
        try:
            names = [e.rstrip("/").rsplit("/", 1)[-1] for e in self.fs.ls(self.p(directory), detail=False)]
        except FileNotFoundError:
            return set()
        stems = (n[: -len(suffix)] if suffix and n.endswith(suffix) else n for n in names)
        return {int(stem) for stem in stems if stem.isdigit()}

    def abandoned_generations(self) -> list[int]:
        """Checkpoint directories whose generation was never completed (interrupted restores)."""
        return sorted(self._numbers("checkpoints") - set(self.generations()))

    def current_generation(self) -> int | None:
        gens = self.generations()
        return gens[-1] if gens else None

    def checkpoint_url(self, generation: int | None = None) -> str:
        """URL of a generation's checkpoint (the current one by default)."""
        gen = generation if generation is not None else self.current_generation()
        if gen is None:
            raise self._no_generation_error()
        return self.url_of("checkpoints", f"{gen:0{GENERATION_WIDTH}d}")

    def _no_generation_error(self) -> JobStateError:
        """Why there is no current generation, and the way out (a directory without its record is not one)."""
        unrecorded = self.abandoned_generations()
        if not unrecorded:
            return JobStateError(f"job home {self.url} has no checkpoint generation yet (no generations/NNNN.json "
                                 "record); start the job first, or restore a savepoint")
        names = ", ".join(f"{n:0{GENERATION_WIDTH}d}" for n in unrecorded)
        last = f"{unrecorded[-1]:0{GENERATION_WIDTH}d}"
        return JobStateError(
            f"job home {self.url} has no current checkpoint generation: checkpoints/{names} exist(s) but "
            f"generations/{last}.json, the record that makes a generation current (written last, when it was "
            "complete), is missing, so it is an interrupted restore or a directory put there by hand. To resume "
            f"from checkpoints/{last}, write generations/{last}.json as "
            f'{{"generation": {int(last)}, "reason": "submit", "start_offsets": null}} after checking it with '
            f"a checkpoint fsck of {self.url_of('checkpoints', last)}; otherwise "
            "delete the directory and restore a savepoint (or start the job afresh)", setting="checkpoint"
        )

    def generation_info(self, generation: int) -> dict[str, Any] | None:
        return read_json(self.fs, self.p("generations", f"{generation:0{GENERATION_WIDTH}d}.json"))

    def new_generation(self, reason: str, start_offsets: dict | str | None = None,
                       from_savepoint: str | None = None,
                       populate: Callable[[str], None] | None = None) -> tuple[int, str]:
        """Create the next checkpoint generation and make it current.

        ``populate`` fills the new checkpoint directory (a restore copies a
        savepoint into it); the generation record is written only after it
        returns, so a crash meanwhile leaves the previous generation current.
        """
        taken = self._numbers("checkpoints") | set(self.generations())
        gen = max(taken, default=0) + 1
        name = f"{gen:0{GENERATION_WIDTH}d}"
        # On object stores this creates nothing; an interrupted restore's partial files keep the number taken.
        self.fs.makedirs(self.p("checkpoints", name), exist_ok=True)
        url = self.checkpoint_url(gen)
        if populate is not None:
            populate(url)
        info = {
            "generation": gen,
            "created_at": utc_now().isoformat(),
            "reason": reason,
            "start_offsets": start_offsets,
            "from_savepoint": from_savepoint,
        }
        write_atomic(self.fs, self.p("generations", f"{name}.json"), dump_json(info))
        return gen, url

    # -- savepoints ------------------------------------------------------------------------------
    @property
    def savepoints_url(self) -> str:
        return self.url_of("savepoints")

    def savepoint_url(self, savepoint_id: str) -> str:
        if not savepoint_id or "/" in savepoint_id or savepoint_id.startswith("."):
            raise InvalidInputError(f"savepoint id {savepoint_id!r} is invalid; list ids with `savepoint list`")
        return self.url_of("savepoints", savepoint_id)

    # -- history ---------------------------------------------------------------------------------
    def append_history(self, record: dict[str, Any]) -> None:
        """Add one record; never loses another writer's (see storage/history.py)."""
        history_log.append(self.fs, self.path, record)

    def history(self) -> list[dict[str, Any]]:
        """Every operation record, oldest first."""
        return history_log.read(self.fs, self.path)

    def compact_history(self) -> int:
        """Fold an object store's record objects into history.jsonl; only the job lock's holder may."""
        return history_log.compact(self.fs, self.path)

    # -- lock ------------------------------------------------------------------------------------
    def read_lock(self) -> dict[str, Any] | None:
        try:
            return read_json(self.fs, self.p("lock"))
        except json.JSONDecodeError:
            return {"holder": "unknown (unreadable lock file)"}

    @contextmanager
    def lock(self, operation: str, holder: str | None = None, wait_seconds: float = 0.0) -> Iterator[dict[str, Any]]:
        """Hold the job's exclusive control-plane lock for one operation.

        The lock file carries a random token: on release it is removed only if it still holds ours,
        so a holder whose lock was broken (``unlock``) never removes the lock of whoever took it next.
        ``wait_seconds`` lets a caller that must not fail on a brief operation of someone else (a driver
        taking over right after the upgrade's go, which is written under the lock) wait for its release.
        """
        info = {"operation": operation, "holder": holder or who_am_i(), "acquired_at": utc_now().isoformat(),
                "host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex}
        deadline = time.monotonic() + wait_seconds
        while not (acquired := self._acquire(info)) and time.monotonic() < deadline:
            time.sleep(LOCK_POLL_SECONDS)
        if not acquired:
            held = self.read_lock() or {}
            elsewhere = held.get("host") not in (None, socket.gethostname())
            raise JobStateError(
                f"job home {self.url} is locked by {held.get('holder', '?')} for "
                f"{held.get('operation', '?')} since {held.get('acquired_at', '?')}"
                + (f" from host {held.get('host')}, whose processes cannot be checked from here" if elsewhere else "")
                + "; wait for that operation to finish, or, if its process died, release it with the unlock "
                f"operation (the CLI's unlock command) on job home {self.url}"
            )
        try:
            yield info
        finally:
            self._release(info)

    def _release(self, info: dict[str, Any]) -> None:
        """Remove the lock file if it is still ours; never after an ``unlock`` broke ours.

        ``unlock`` leaves a tombstone named by the broken lock's token before it removes the lock, so a
        holder whose lock was broken finds the tombstone and touches nothing, however late it finishes
        (an unlock that was given while the holder was still working, on this host or another). Without a
        tombstone the token is compared before the delete; neither a local rename nor an S3 DELETE can be
        made conditional on the file's content through fsspec, so only an unlock racing this very release
        (milliseconds) is left uncovered.
        """
        tombstone = self.p(*BROKEN_LOCKS, info["token"])
        try:
            if self.fs.exists(tombstone):
                log.warning("the lock of %s for %s was broken with `unlock` while the operation ran: the lock "
                            "there now (if any) belongs to someone else and is left in place", self.url,
                            info.get("operation"))
                self.fs.rm(tombstone)
                return
            held = self.read_lock()
        except OSError as exc:
            log.warning("could not read the lock of %s to release it (left in place): %s", self.url, exc)
            return
        if held is None:
            log.warning("the lock of %s for %s was already removed (an `unlock` broke it while the operation ran)",
                        self.url, info.get("operation"))
            return
        if held.get("token") != info["token"]:
            log.warning("the lock of %s is now held by %s for %s (ours was broken with `unlock`): left in place",
                        self.url, held.get("holder"), held.get("operation"))
            return
        try:
            self.fs.rm(self.p("lock"))
        except FileNotFoundError:
            pass

    def _acquire(self, info: dict[str, Any]) -> bool:
        """Create the lock file; break it first when its holder is a dead process of this host."""
        if create_exclusive(self.fs, self.p("lock"), dump_json(info)):
            return True
        held = self.read_lock() or {}
        if not _holder_is_dead(held):
            return False
        log.warning("breaking the lock of %s left by %s for %s: its process %s on this host is gone", self.url,
                    held.get("holder"), held.get("operation"), held.get("pid"))
        if self.read_lock() == held:  # narrow the window in which two breakers could both succeed
            self.fs.rm(self.p("lock"))
        return create_exclusive(self.fs, self.p("lock"), dump_json(info))

    def force_unlock(self) -> dict[str, Any] | None:
        """Break the lock whoever holds it (its process died); the holder, if alive, will not remove the next one.

        A tombstone named by the broken lock's token is written first: its holder, should it still be running
        on some host, finds it when it finishes and leaves whatever lock is there alone.
        """
        held = self.read_lock()
        if held is not None:
            token = held.get("token")
            if isinstance(token, str) and token and "/" not in token:
                write_atomic(self.fs, self.p(*BROKEN_LOCKS, token),
                             dump_json({"broken_at": utc_now().isoformat(), "by": who_am_i(), "lock": held}))
            try:
                self.fs.rm(self.p("lock"))
            except FileNotFoundError:
                return None
        return held


def _holder_is_dead(held: dict[str, Any]) -> bool:
    """Whether a lock was left by a process of this host that no longer exists.

    Locks of other hosts cannot be judged from here: they need `unlock`.
    """
    return process_alive(held.get("pid"), held.get("host")) is False
