"""The job's exclusive control-plane lock (``<home>/lock``), one operation at a time.

A part of :class:`~airflow_kafka_stream.storage.jobhome.JobHome` (a mixin: it uses the home's ``fs``, ``p``
and ``url``); ``unlock`` leaves the token of each lock it broke in ``control/broken-locks/`` so that lock's
holder never removes a later one.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_kafka_stream.errors import JobStateError
from airflow_kafka_stream.storage.files import create_exclusive, dump_json, read_json, write_atomic
from airflow_kafka_stream.storage.layout import LOCK, broken_lock
from airflow_kafka_stream.storage.processes import process_alive

#: How often a caller waiting for the job lock looks again.
LOCK_POLL_SECONDS = 0.2

log = logging.getLogger("airflow_kafka_stream.storage.jobhome")


def utc_now() -> datetime:
    return datetime.now(UTC)


def who_am_i() -> str:
    """The actor recorded in history and locks: user@host:pid (or AIRFLOW_CTX_* when in a task)."""
    user = os.environ.get("AIRFLOW_CTX_DAG_OWNER") or getpass.getuser()
    task = os.environ.get("AIRFLOW_CTX_DAG_ID")
    where = f"{socket.gethostname()}:{os.getpid()}"
    return f"{user}@{where}" + (f" (dag {task})" if task else "")


class JobLock:
    """The lock half of a job home (mixed into ``JobHome``)."""

    fs: Any
    url: str

    if TYPE_CHECKING:
        def p(self, *parts: str) -> str: ...

    def read_lock(self) -> dict[str, Any] | None:
        try:
            return read_json(self.fs, self.p(*LOCK))
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
        tombstone = self.p(*broken_lock(info["token"]))
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
            self.fs.rm(self.p(*LOCK))
        except FileNotFoundError:
            pass

    def _acquire(self, info: dict[str, Any]) -> bool:
        """Create the lock file; break it first when its holder is a dead process of this host."""
        if create_exclusive(self.fs, self.p(*LOCK), dump_json(info)):
            return True
        held = self.read_lock() or {}
        if not _holder_is_dead(held):
            return False
        log.warning("breaking the lock of %s left by %s for %s: its process %s on this host is gone", self.url,
                    held.get("holder"), held.get("operation"), held.get("pid"))
        if self.read_lock() == held:  # narrow the window in which two breakers could both succeed
            self.fs.rm(self.p(*LOCK))
        return create_exclusive(self.fs, self.p(*LOCK), dump_json(info))

    def force_unlock(self) -> dict[str, Any] | None:
        """Break the lock whoever holds it (its process died); the holder, if alive, will not remove the next one.

        A tombstone named by the broken lock's token is written first: its holder, should it still be running
        on some host, finds it when it finishes and leaves whatever lock is there alone.
        """
        held = self.read_lock()
        if held is not None:
            token = held.get("token")
            if isinstance(token, str) and token and "/" not in token:
                write_atomic(self.fs, self.p(*broken_lock(token)),
                             dump_json({"broken_at": utc_now().isoformat(), "by": who_am_i(), "lock": held}))
            try:
                self.fs.rm(self.p(*LOCK))
            except FileNotFoundError:
                return None
        return held


def _holder_is_dead(held: dict[str, Any]) -> bool:
    """Whether a lock was left by a process of this host that no longer exists.

    Locks of other hosts cannot be judged from here: they need `unlock`.
    """
    return process_alive(held.get("pid"), held.get("host")) is False
