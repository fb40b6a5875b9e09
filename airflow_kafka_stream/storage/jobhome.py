"""A job's home directory: the few facts every operation needs, kept together.

The layout (every file and directory of a home, named once) is ``storage.layout``. ``JobHome`` owns the
paths, job.json, status.json, the checkpoint generations, savepoints and history; its control files
(``storage.control``) and its lock (``storage.lock``) are mixed in from their own modules.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from airflow_kafka_stream.core.status_document import StatusDocument
from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.storage import history as history_log
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage.control import STOP_MODE_DRAIN, STOP_MODE_KILL, ControlFiles
from airflow_kafka_stream.storage.files import (
    check_url,
    dump_json,
    is_local,
    read_json,
    unstrip,
    url_to_fs,
    write_atomic,
)
from airflow_kafka_stream.storage.layout import BROKEN_LOCKS, GENERATION_WIDTH, STANDBY_GO, STANDBY_RECORD
from airflow_kafka_stream.storage.lock import LOCK_POLL_SECONDS, JobLock, _holder_is_dead, utc_now, who_am_i

#: Names others import from here.
__all__ = ["BROKEN_LOCKS", "GENERATION_WIDTH", "LOCK_POLL_SECONDS", "STANDBY_GO", "STANDBY_RECORD",
           "STOP_MODE_DRAIN", "STOP_MODE_KILL", "JobHome", "_holder_is_dead", "utc_now", "who_am_i"]

log = logging.getLogger(__name__)


class JobHome(ControlFiles, JobLock):
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
        return self.url_of(*layout.CONTROL)

    def exists(self) -> bool:
        return self.fs.exists(self.path)

    def require(self) -> None:
        """Raise when the directory is not a job home (no job.json and no checkpoints)."""
        if not (self.fs.exists(self.p(*layout.JOB_SPEC)) or self.fs.exists(self.p(*layout.CHECKPOINTS))):
            raise InvalidInputError(
                f"{self.url} is not a job home: it has neither job.json nor checkpoints/; "
                "give as job_home the directory the job was started with", setting="job_home"
            )

    # -- job spec and status -----------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        return read_json(self.fs, self.p(*layout.JOB_SPEC)) or {}

    def write_spec(self, spec: dict[str, Any]) -> None:
        write_atomic(self.fs, self.p(*layout.JOB_SPEC), dump_json(spec))

    def status(self) -> dict[str, Any] | None:
        """The running job's last status, or None when it has none yet (or it is unreadable)."""
        try:
            status = read_json(self.fs, self.p(*layout.STATUS))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return status if isinstance(status, dict) else None

    def status_document(self) -> StatusDocument | None:
        """The running job's last status, typed (``core.status_document``); None as :meth:`status`."""
        return StatusDocument.parse(self.status())

    # -- checkpoint generations ----------------------------------------------------------------
    def generations(self) -> list[int]:
        """Complete checkpoint generations, ascending: those whose generations/NNNN.json exists.

        The record is written last, so a generation whose creation was interrupted
        (a restore killed mid-copy) never becomes current.
        """
        return sorted(n for n in self._numbers(layout.GENERATIONS[0], layout.GENERATION_RECORD_SUFFIX))

    def _numbers(self, directory: str, suffix: str = "") -> set[int]:
        try:
            names = [e.rstrip("/").rsplit("/", 1)[-1] for e in self.fs.ls(self.p(directory), detail=False)]
        except FileNotFoundError:
            return set()
        stems = (n[: -len(suffix)] if suffix and n.endswith(suffix) else n for n in names)
        return {int(stem) for stem in stems if stem.isdigit()}

    def abandoned_generations(self) -> list[int]:
        """Checkpoint directories whose generation was never completed (interrupted restores)."""
        return sorted(self._numbers(layout.CHECKPOINTS[0]) - set(self.generations()))

    def current_generation(self) -> int | None:
        gens = self.generations()
        return gens[-1] if gens else None

    def checkpoint_url(self, generation: int | None = None) -> str:
        """URL of a generation's checkpoint (the current one by default)."""
        gen = generation if generation is not None else self.current_generation()
        if gen is None:
            raise self._no_generation_error()
        return self.url_of(*layout.checkpoint(gen))

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
        return read_json(self.fs, self.p(*layout.generation_record(generation)))

    def generation_start_url(self, generation: int) -> str:
        """Where a generation's start offsets are written (``startOffsetsPath`` of the source), as a URL."""
        return self.url_of(*layout.generation_start(generation))

    def generation_start(self, generation: int) -> dict[str, Any] | None:
        """The offsets document a generation's first batch started at (``generations/NNNN.start.json``),
        None when it has none (or it is not readable whole)."""
        return self.read_control(layout.generation_start(generation))

    def generation_start_offsets(self, generation: int) -> Any:
        """The offsets a generation started from: its start document's ``offsets`` when it has one, else the
        ``start_offsets`` its record was created with (None when neither says)."""
        started = self.generation_start(generation)
        if started:
            return started.get("offsets")
        return (self.generation_info(generation) or {}).get("start_offsets")

    def new_generation(self, reason: str, start_offsets: dict | str | None = None,
                       from_savepoint: str | None = None,
                       populate: Callable[[str], None] | None = None) -> tuple[int, str]:
        """Create the next checkpoint generation and make it current.

        ``populate`` fills the new checkpoint directory (a restore copies a
        savepoint into it); the generation record is written only after it
        returns, so a crash meanwhile leaves the previous generation current.
        """
        taken = self._numbers(layout.CHECKPOINTS[0]) | set(self.generations())
        gen = max(taken, default=0) + 1
        # On object stores this creates nothing; an interrupted restore's partial files keep the number taken.
        self.fs.makedirs(self.p(*layout.checkpoint(gen)), exist_ok=True)
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
        write_atomic(self.fs, self.p(*layout.generation_record(gen)), dump_json(info))
        return gen, url

    # -- savepoints ------------------------------------------------------------------------------
    @property
    def savepoints_url(self) -> str:
        return self.url_of(*layout.SAVEPOINTS)

    def rehearsal_url(self, token: str) -> str:
        """A standby's private scratch area (``rehearsals/<token>``): nothing of the job reads it."""
        return self.url_of(*self._rehearsal(token))

    def remove_rehearsal(self, token: str) -> bool:
        """Remove a standby's scratch area (its rehearsal ended, or the standby was ended); whether one was there.
        A failure is logged, not raised: the next removal of the same token clears what is left."""
        scratch = self.p(*self._rehearsal(token))
        try:
            if not self.fs.exists(scratch):
                return False
            self.fs.rm(scratch, recursive=True)
            return True
        except OSError as exc:
            log.warning("could not remove the rehearsal scratch area %s: %s", scratch, exc)
            return False

    @staticmethod
    def _rehearsal(token: str) -> layout.Name:
        if not layout.is_segment(token):
            raise InvalidInputError(f"rehearsal token {token!r} is not one path segment")
        return (*layout.REHEARSALS, token)

    def savepoint_url(self, savepoint_id: str) -> str:
        if not layout.is_segment(savepoint_id):
            raise InvalidInputError(f"savepoint id {savepoint_id!r} is invalid: an id is one path segment; give the "
                                    "id of one of the job's savepoints, as listed", setting="savepoint_id")
        return self.url_of(*layout.savepoint(savepoint_id))

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
