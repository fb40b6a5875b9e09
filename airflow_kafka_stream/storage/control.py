"""The control files of a job home (``control/``, ``submissions/``, ``logs/``), each read and written here only.

A part of :class:`~airflow_kafka_stream.storage.jobhome.JobHome` (a mixin: it uses the home's ``fs``, ``p``
and ``url``); the names are those of ``storage.layout``. Every document is written whole (temporary name
and rename locally, one PUT on object stores) and a reader gets None for one that is absent or not a JSON
object (being replaced by hand, or from a broken write).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage.files import dump_json, read_json, write_atomic

#: Modes of a stop request (``control/stop``): finish the running batch first, or cancel it.
STOP_MODE_DRAIN = "drain"
STOP_MODE_KILL = "kill"


class ControlFiles:
    """The control half of a job home (mixed into ``JobHome``)."""

    fs: Any
    url: str

    if TYPE_CHECKING:
        def p(self, *parts: str) -> str: ...

        def url_of(self, *parts: str) -> str: ...

    # -- any document of the home ----------------------------------------------------------------
    def read_control(self, name: tuple[str, ...]) -> dict[str, Any] | None:
        """A JSON document of the home (e.g. :data:`STANDBY_RECORD`), None when absent or not readable whole."""
        try:
            found = read_json(self.fs, self.p(*name))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return found if isinstance(found, dict) else None

    def write_control(self, name: tuple[str, ...], document: Mapping[str, Any]) -> None:
        write_atomic(self.fs, self.p(*name), dump_json(dict(document)))

    # -- the stop request and the source's drain answer ------------------------------------------
    def request_stop(self, by: str, mode: str = STOP_MODE_DRAIN) -> None:
        """Ask the running job to stop: drain (finish the running batch) or kill (cancel it)."""
        self.write_control(layout.STOP_REQUEST,
                           {"requested_at": datetime.now(UTC).isoformat(), "by": by, "mode": mode})

    def stop_requested(self) -> bool:
        return self.fs.exists(self.p(*layout.STOP_REQUEST))

    def stop_request(self, *, unreadable_stands: bool = False) -> dict[str, Any] | None:
        """The stop request (requested_at, by, mode), None when there is none (or it is unreadable).

        With ``unreadable_stands`` (the driver's supervision), a request that exists but is not a JSON object
        read whole (being written where rename is not atomic) reads as ``{}``: it stands, and its fields are
        read at the next look.
        """
        if not unreadable_stands:
            return self.read_control(layout.STOP_REQUEST)
        try:
            found = read_json(self.fs, self.p(*layout.STOP_REQUEST))
        except (ValueError, UnicodeDecodeError):
            return {}
        if found is None:
            return None
        return found if isinstance(found, dict) else {}

    def drained(self) -> dict[str, Any] | None:
        """The source's drain answer (``offsets`` it planned no batch after), None when it gave none yet."""
        return self.read_control(layout.DRAINED)

    def clear_drained(self) -> bool:
        """Remove the drain answer (a withdrawn stop); whether there was one."""
        try:
            self.fs.rm(self.p(*layout.DRAINED))
        except FileNotFoundError:
            return False
        return True

    def clear_stop_request(self) -> list[str]:
        """Remove the stop request and the source's drain answer; the names of those that existed."""
        removed = []
        for name in (layout.STOP_REQUEST, layout.DRAINED):
            if self.fs.exists(self.p(*name)):
                self.fs.rm(self.p(*name))
                removed.append(name[-1])
        return removed

    # -- the warm standby ------------------------------------------------------------------------
    def standby_record(self) -> dict[str, Any] | None:
        """``control/standby.json``: the next version's warm standby (see core.standby), None when none."""
        return self.read_control(layout.STANDBY_RECORD)

    def write_standby_record(self, document: Mapping[str, Any]) -> None:
        self.write_control(layout.STANDBY_RECORD, document)

    def standby_go(self) -> dict[str, Any] | None:
        """``control/standby-go.json``: the upgrade's go (or cancel) for the standby holding its token."""
        return self.read_control(layout.STANDBY_GO)

    def write_standby_go(self, document: Mapping[str, Any]) -> None:
        self.write_control(layout.STANDBY_GO, document)

    def clear_standby_go(self) -> bool:
        """Remove the go once its standby took the job over, or the cancel once its standby is gone; whether
        there was one."""
        try:
            self.fs.rm(self.p(*layout.STANDBY_GO))
        except FileNotFoundError:
            return False
        return True

    # -- launches and submissions ----------------------------------------------------------------
    def launch_record(self) -> dict[str, Any] | None:
        """``control/launched.json``: the last driver a submit launched, None when none (or unreadable)."""
        return self.read_control(layout.LAUNCH_RECORD)

    def record_launch(self, document: Mapping[str, Any]) -> None:
        self.write_control(layout.LAUNCH_RECORD, document)

    def submission_path(self, app_version: str) -> str:
        """Where ``app_version``'s submission is recorded; refuses a version that is not one path segment."""
        version = str(app_version)
        if not layout.is_segment(version):
            raise InvalidInputError(f"app_version {version!r} is invalid: it names the version's submission record, so a "
                                    "version is one path segment (no '/', not starting with '.')", setting="app_version")
        return self.p(*layout.submission(version))

    def submission(self, app_version: str) -> dict[str, Any] | None:
        """How ``app_version`` was last submitted (application, arguments, settings; never a secret), or None."""
        path = self.submission_path(app_version)
        try:
            found = read_json(self.fs, path)
        except (ValueError, UnicodeDecodeError):
            return None
        return found if isinstance(found, dict) else None

    def record_submission(self, app_version: str, document: Mapping[str, Any]) -> None:
        write_atomic(self.fs, self.submission_path(app_version), dump_json(dict(document)))

    def log_path(self, name: str) -> str:
        """A path in the home's ``logs/`` (created), for a driver's output; only a local home has one."""
        self.fs.makedirs(self.p(*layout.LOGS), exist_ok=True)
        return self.p(*layout.log_file(name))

    # -- the watchdog's memory and the savepoint pins --------------------------------------------
    def watchdog_memory(self) -> dict[str, Any] | None:
        """``control/watchdog.json``: what the last watchdog run saw (core.watchdog.Progress), None when none."""
        return self.read_control(layout.WATCHDOG_MEMORY)

    def write_watchdog_memory(self, document: Mapping[str, Any]) -> None:
        self.write_control(layout.WATCHDOG_MEMORY, document)

    def pins(self) -> dict[str, str]:
        """Savepoints that must not be pruned, each with why (an upgrade in progress may roll back to it)."""
        try:
            found = read_json(self.fs, self.p(*layout.PINS))
        except ValueError:
            found = None
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def write_pins(self, pins: Mapping[str, str]) -> None:
        self.write_control(layout.PINS, dict(pins))

    # -- verify's window of looks at the group, and the lag objective ----------------------------
    def lag_window(self) -> list[dict[str, Any]]:
        """``control/lag-window.json``: the group's recent looks (``core.lag_window.Look`` documents), as
        written; empty when there is none or it is unreadable (the window starts again)."""
        looks = (self.read_control(layout.LAG_WINDOW) or {}).get("looks")
        return [look for look in looks if isinstance(look, dict)] if isinstance(looks, list) else []

    def write_lag_window(self, looks: list[Mapping[str, Any]]) -> None:
        """Replace the window's looks (the caller bounds them: ``core.lag_window.bound``)."""
        self.write_control(layout.LAG_WINDOW, {"looks": [dict(look) for look in looks]})

    def objective(self) -> dict[str, Any] | None:
        """``control/objective.json``: the job's lag objective and what its last check saw, None when none."""
        return self.read_control(layout.OBJECTIVE)

    def write_objective(self, document: Mapping[str, Any]) -> None:
        self.write_control(layout.OBJECTIVE, document)

    def announced_assets(self) -> dict[str, Any] | None:
        """``control/assets.json``: the output asset's windows announced to Airflow (core.asset_windows), None
        when the job announced none."""
        return self.read_control(layout.ASSETS)

    def write_announced_assets(self, document: Mapping[str, Any]) -> None:
        self.write_control(layout.ASSETS, document)

    # -- the status, written by the control plane only when the driver cannot --------------------
    def mark_driver_killed(self, status: Mapping[str, Any], error: str, now: datetime | None = None) -> dict[str, Any]:
        """Record that the driver of ``status`` was killed and can no longer say how it ended: FAILED with
        ``error``, so nothing mistakes it for a live one. The driver writes ``status.json`` otherwise."""
        ended = {**status, "state": JobState.FAILED.value, "error": error,
                 "stopped_at": (now or datetime.now(UTC)).isoformat()}
        write_atomic(self.fs, self.p(*layout.STATUS), dump_json(ended))
        return ended
