"""The upgrade's phases, in the order they run: the one list both front-ends follow.

The command line's :func:`ops.upgrade.upgrade` runs them one after the other in its process and announces each
as it begins; the Airflow task group (``operators.upgrade``) gives each its own task, named by the phase's value,
and chains the tasks in this order. docs/architecture.md tables what each observes, decides and writes.
"""

from __future__ import annotations

import enum


class UpgradePhase(enum.StrEnum):
    """A phase of the upgrade; its value is the task id the Airflow task group gives it."""

    STANDBY = "start_standby"  # the new version comes up beside the old one, rehearses, reports READY
    STOP = "stop_with_savepoint"  # the old version drains and stops; the savepoint is pinned
    RESTORE = "restore_without_state"  # drop_state only: a generation seeded at the savepoint's offsets
    START = "submit_new_version"  # the standby's go, or a cold submit; RUNNING or failed
    HEALTH = "health_gate"  # its own batches committed, lag not growing
    ROLLBACK_STOP = "rollback_stop_new_version"  # on a failed start or gate: the new version stopped at once
    ROLLBACK_RESTORE = "rollback_restore_savepoint"  # a generation restored from the savepoint, state included
    ROLLBACK_START = "rollback_submit_previous_version"  # the previous version, exactly as it was submitted
    OUTCOME = "outcome"  # decided: unpin, end an unused standby, say what runs now


#: The way forward; each phase runs after the one before it (the restore only with ``drop_state``).
FORWARD: tuple[UpgradePhase, ...] = (UpgradePhase.STANDBY, UpgradePhase.STOP, UpgradePhase.RESTORE,
                                     UpgradePhase.START, UpgradePhase.HEALTH)
#: The way back, taken when the start or the health gate failed and ``rollback`` is on.
ROLLBACK: tuple[UpgradePhase, ...] = (UpgradePhase.ROLLBACK_STOP, UpgradePhase.ROLLBACK_RESTORE,
                                      UpgradePhase.ROLLBACK_START)
