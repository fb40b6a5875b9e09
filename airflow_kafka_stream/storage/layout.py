"""A job home's layout: every file and directory of it, named once.

Each name is a tuple of path parts relative to the home (``JobHome.p(*name)``
makes a path of it, ``JobHome.url_of(*name)`` a URL). Only the module that owns
a file reads or writes it (``storage.jobhome``'s ``JobHome`` and the small
owners beside it: ``storage.status``, ``storage.history``, ``storage.control``);
everything else goes through their methods.

Layout (any fsspec URL)::

    <home>/job.json                      what was submitted
    <home>/status.json                   kept fresh by the running job (storage.status, core.status_document)
    <home>/lock                          held by the control-plane operation in progress
    <home>/control/stop                  a request to drain and stop
    <home>/control/drained.json          the source's answer: it planned no batch after these offsets
    <home>/control/standby.json          the next version's warm standby driver, if any (see core.standby)
    <home>/control/standby-go.json       the upgrade's go (or cancel) for that standby
    <home>/control/launched.json         the last driver a submit launched (a retried submit sees it)
    <home>/control/watchdog.json         the watchdog's memory between runs (core.watchdog.Progress)
    <home>/control/pins.json             savepoints kept out of housekeeping, with the reason
    <home>/control/lag-window.json       the group's recent looks, verify's window rules judge them (core.lag_window)
    <home>/control/objective.json        the job's lag objective and what its last check saw (core.objective)
    <home>/control/assets.json           the output asset's windows announced to Airflow (core.asset_windows)
    <home>/control/broken-locks/<token>  tokens of locks broken by ``unlock`` (their holders must not release)
    <home>/submissions/<version>.json    how each version was last submitted (no secret)
    <home>/checkpoints/<NNNN>/           checkpoint generations; the current one is the highest with a record
    <home>/generations/<NNNN>.json       how each generation started (written last: it makes it current)
    <home>/generations/<NNNN>.start.json the offsets the generation's first batch starts at, when given
    <home>/savepoints/<id>/              immutable savepoints
    <home>/rehearsals/<token>/           a standby's private rehearsal (a scratch copy of the checkpoint, its
                                         output); removed when the rehearsal ends
    <home>/logs/<name>                   the logs of drivers launched by the control plane
    <home>/history.jsonl                 append-only record of every operation (object stores: with history/,
                                         one object a record until the lock holder folds them in)
"""

from __future__ import annotations

Name = tuple[str, ...]

JOB_SPEC: Name = ("job.json",)
STATUS: Name = ("status.json",)
LOCK: Name = ("lock",)
HISTORY: Name = ("history.jsonl",)
#: Where an object store's history records wait, one object each, until the lock holder folds them in.
HISTORY_RECORDS: Name = ("history",)

CONTROL: Name = ("control",)
STOP_REQUEST: Name = (*CONTROL, "stop")
DRAINED: Name = (*CONTROL, "drained.json")
STANDBY_RECORD: Name = (*CONTROL, "standby.json")
STANDBY_GO: Name = (*CONTROL, "standby-go.json")
LAUNCH_RECORD: Name = (*CONTROL, "launched.json")
WATCHDOG_MEMORY: Name = (*CONTROL, "watchdog.json")
PINS: Name = (*CONTROL, "pins.json")
#: The group's recent looks (verify's window rules) and the lag objective with its last check.
LAG_WINDOW: Name = (*CONTROL, "lag-window.json")
OBJECTIVE: Name = (*CONTROL, "objective.json")
#: The output asset's event-time windows the driver announced to Airflow (moves forward only).
ASSETS: Name = (*CONTROL, "assets.json")
BROKEN_LOCKS: Name = (*CONTROL, "broken-locks")

CHECKPOINTS: Name = ("checkpoints",)
GENERATIONS: Name = ("generations",)
SAVEPOINTS: Name = ("savepoints",)
SUBMISSIONS: Name = ("submissions",)
LOGS: Name = ("logs",)
REHEARSALS: Name = ("rehearsals",)

#: Digits of a generation's number in its names (0001).
GENERATION_WIDTH = 4
GENERATION_RECORD_SUFFIX = ".json"
GENERATION_START_SUFFIX = ".start.json"


def generation_name(generation: int) -> str:
    """A generation's number as its names spell it: ``0007``."""
    return f"{generation:0{GENERATION_WIDTH}d}"


def checkpoint(generation: int) -> Name:
    return (*CHECKPOINTS, generation_name(generation))


def generation_record(generation: int) -> Name:
    """``generations/NNNN.json``: how the generation started; its existence makes the generation complete."""
    return (*GENERATIONS, generation_name(generation) + GENERATION_RECORD_SUFFIX)


def generation_start(generation: int) -> Name:
    """``generations/NNNN.start.json``: the offsets the generation's first batch starts at."""
    return (*GENERATIONS, generation_name(generation) + GENERATION_START_SUFFIX)


def savepoint(savepoint_id: str) -> Name:
    return (*SAVEPOINTS, savepoint_id)


def submission(app_version: str) -> Name:
    """``submissions/<version>.json`` (the version is checked as one path segment by its owner)."""
    return (*SUBMISSIONS, f"{app_version}.json")


def log_file(name: str) -> Name:
    return (*LOGS, name)


def broken_lock(token: str) -> Name:
    return (*BROKEN_LOCKS, token)


def is_segment(name: str) -> bool:
    """Whether ``name`` can be one path segment of the home (a savepoint id, a version): no slash, no dot first."""
    return bool(name) and "/" not in name and not name.startswith(".")
