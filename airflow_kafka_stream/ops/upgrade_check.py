"""Will this version take over? The upgrade's rehearsal on its own, changing nothing.

:func:`check_upgrade` launches the new version as a standby that only reports (``check``: it may run beside a
stopped job, records no submission and never takes over), lets it rehearse its own query on a private copy of
the job's state (``runtime/rehearsal.py``), reads its verdict and ends it. The job's checkpoint, group,
status, job.json, savepoints and output are untouched; the history records the check, the standby's launch
and its end, and ``control/standby.json`` keeps the ended standby's record (with the verdict).

Verdicts (``core.rehearsal.Verdict``): ``compatible``; ``needs drop_state`` (the state does not fit, the query
runs from the offsets alone); ``fails`` (with the reason: the record, the sink, the operators); ``timed out``;
``not rehearsed`` (nothing to rehearse on).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.rehearsal import RehearsalResult, Verdict, lets_upgrade_go_on
from airflow_kafka_stream.ops.launcher import Launcher, Submission
from airflow_kafka_stream.ops.standby import end_standby, launch_standby, look_standby
from airflow_kafka_stream.ops.submit import log_tail
from airflow_kafka_stream.ops.upgrade import UpgradeOptions
from airflow_kafka_stream.ops.watch import wait
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation

log = logging.getLogger(__name__)

#: What gets a stopped upgrade going, per verdict that stops it: the words, then the settings that give it (the
#: command line names their flags, an operator its parameters).
WAY_OUT: dict[str, tuple[str, tuple[str, ...]]] = {
    Verdict.NEEDS_DROP_STATE: ("upgrade without the state (drop_state: the new version then starts from the "
                               "savepoint's offsets), or keep the state's schema in the new version", ("drop_state",)),
    Verdict.FAILS: ("fix the new version (its code, its sink, its arguments) and check again",
                    ("application", "application_args")),
    Verdict.TIMED_OUT: ("give the rehearsal more time, or check when the machine is less busy",
                        ("rehearsal_timeout_seconds", "standby_ready_timeout_seconds")),
}


@dataclass(frozen=True)
class UpgradeCheck:
    """The check's answer: the verdict, why, and what the rehearsal ran."""

    app_version: str
    verdict: str
    reason: str
    seconds: float = 0.0
    batches: int = 0
    records: int = 0
    with_state: bool = True
    drop_state: bool = False
    #: The standby's driver log, and its end, when it failed (kept out of ``reason``: a traceback would bury it).
    log: str | None = None
    log_tail: str = ""

    @property
    def would_upgrade(self) -> bool:
        """Whether an upgrade with the same ``drop_state`` would go on to stop the old version."""
        return lets_upgrade_go_on(self.verdict, self.drop_state)

    @property
    def way_out(self) -> tuple[str, tuple[str, ...]]:
        """What to change when the upgrade would not go on (``WAY_OUT``); no words when it would."""
        return ("", ()) if self.would_upgrade else WAY_OUT.get(self.verdict, ("", ()))

    def to_dict(self) -> dict[str, Any]:
        return {"app_version": self.app_version, "verdict": self.verdict, "reason": self.reason,
                "seconds": round(self.seconds, 3), "batches": self.batches, "records": self.records,
                "with_state": self.with_state, "drop_state": self.drop_state, "would_upgrade": self.would_upgrade,
                "log": self.log}


def check_upgrade(home: JobHome, new: Submission, launcher: Launcher, options: UpgradeOptions | None = None, *,
                  secrets: list[str] | None = None, by: str | None = None,
                  say: Callable[[str], None] = log.info) -> UpgradeCheck:
    """Rehearse ``new`` on the job's state and report the verdict; the standby is ended whatever happens."""
    options = options or UpgradeOptions()
    home.require()
    args = {"app_version": new.app_version, "drop_state": options.drop_state}
    with recorded_operation(home, "upgrade-check", args, by=by, lock=False) as record:
        say(f"starting version {new.app_version} as a standby that rehearses and reports")
        handle = launch_standby(home, new, launcher, by=by, rehearse=options.rehearsal_request(check=True))
        try:
            event = wait(lambda: look_standby(home, handle), options.standby_ready_timeout_seconds,
                         options.poll_seconds)
            found = home.standby_record() or {}
            rehearsal = RehearsalResult.of(found.get("rehearsal")) if found.get("token") == handle.token else None
        finally:
            end_standby(home, handle, "the upgrade check is done", by=by)
        result = _verdict(new.app_version, options, event, rehearsal, handle.driver_log,
                          log_tail(handle.driver_log, secrets))
        record["after"] = result.to_dict()
        say(f"version {new.app_version}: {result.verdict}: {result.reason}")
        return result


def _verdict(version: str, options: UpgradeOptions, event: dict[str, Any], rehearsal: RehearsalResult | None,
             log_path: str | None, tail: str) -> UpgradeCheck:
    if event.get("status") == WaitStatus.SUCCESS and rehearsal is not None:
        return UpgradeCheck(version, str(rehearsal.verdict), rehearsal.reason, rehearsal.seconds, rehearsal.batches,
                            rehearsal.records, rehearsal.with_state, options.drop_state)
    if event.get("status") == WaitStatus.TIMEOUT:
        return UpgradeCheck(version, str(Verdict.TIMED_OUT), f"the standby was not ready within "
                            f"{options.standby_ready_timeout_seconds:.0f}s ({event.get('last_look')})",
                            drop_state=options.drop_state)
    why = event.get("message") or "the standby reported no verdict"
    return UpgradeCheck(version, str(Verdict.FAILS), f"the new version's standby failed: {why}",
                        drop_state=options.drop_state, log=log_path, log_tail=tail)
