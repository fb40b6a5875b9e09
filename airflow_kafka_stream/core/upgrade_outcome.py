"""What an upgrade concluded, decided from what its steps returned (a pure rule; ``ops.upgrade`` acts on it).

In order:
1. No savepoint: the upgrade failed before any downtime (the standby was not ready, or the old version did
   not stop with a savepoint). Nothing changed; the old version keeps running.
2. The new version passed its health gate: upgraded.
3. The rollback completed: the previous version runs again from the savepoint.
4. Rollback is off: the new version is left as it is; the savepoint stays pinned for a rollback by hand.
5. Otherwise the rollback did not complete; the savepoint stays pinned.

The savepoint is unpinned once nothing can need it any more (2 and 3).
"""

from __future__ import annotations

import enum


class UpgradeVerdict(enum.StrEnum):
    NOTHING_CHANGED = "nothing-changed"
    UPGRADED = "upgraded"
    ROLLED_BACK = "rolled-back"
    LEFT_AS_IS = "left-as-is"
    ROLLBACK_INCOMPLETE = "rollback-incomplete"

    @property
    def unpins_savepoint(self) -> bool:
        """Whether the savepoint taken for a rollback may be pruned again."""
        return self in (UpgradeVerdict.UPGRADED, UpgradeVerdict.ROLLED_BACK)

    @property
    def succeeded(self) -> bool:
        return self is UpgradeVerdict.UPGRADED


def judge_upgrade(*, stopped_with_savepoint: bool, healthy: bool, rolled_back: bool,
                  rollback: bool) -> UpgradeVerdict:
    """The verdict of the module docstring's rules, in their order."""
    if not stopped_with_savepoint:
        return UpgradeVerdict.NOTHING_CHANGED
    if healthy:
        return UpgradeVerdict.UPGRADED
    if rolled_back:
        return UpgradeVerdict.ROLLED_BACK
    if not rollback:
        return UpgradeVerdict.LEFT_AS_IS
    return UpgradeVerdict.ROLLBACK_INCOMPLETE
