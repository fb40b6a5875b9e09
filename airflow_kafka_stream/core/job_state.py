"""The one vocabulary of a job's states, as the driver writes them into ``status.json``.

STARTING -> RUNNING <-> DRAINING -> STOPPED, or FAILED from any of them (DRAINING
returns to RUNNING when the stop request is withdrawn). A ``str`` enum: a member
equals, hashes and serialises (JSON, f-strings) as its name, so statuses written
by any version and comparisons with plain strings keep working.

The groupings are named here too: a *live* state is one the driver reports while
it holds the job (whether it truly still runs is ``core.liveness``'s rule), a
*final* one is the last thing a driver wrote.
"""

from __future__ import annotations

import enum
from typing import Any


class JobState(enum.StrEnum):
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    DRAINING = "DRAINING"
    STOPPED = "STOPPED"
    FAILED = "FAILED"

    @classmethod
    def parse(cls, value: Any) -> JobState | None:
        """The state a status names, None when it names none this package knows (absent, mistyped, other)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                return None
        return None

    @property
    def is_live(self) -> bool:
        """The driver reported it holds the job (STARTING, RUNNING, DRAINING)."""
        return self in LIVE_STATES

    @property
    def is_final(self) -> bool:
        """The driver ended and said so (STOPPED, FAILED)."""
        return self in FINAL_STATES

    @classmethod
    def live(cls) -> frozenset[JobState]:
        return LIVE_STATES

    @classmethod
    def final(cls) -> frozenset[JobState]:
        return FINAL_STATES


#: States of a driver that holds the job (called active states elsewhere).
LIVE_STATES: frozenset[JobState] = frozenset({JobState.STARTING, JobState.RUNNING, JobState.DRAINING})
#: States a driver ends in.
FINAL_STATES: frozenset[JobState] = frozenset({JobState.STOPPED, JobState.FAILED})
ALL_STATES: frozenset[JobState] = LIVE_STATES | FINAL_STATES


def state_names(states: frozenset[JobState] | set[str] | list[str]) -> list[str]:
    """Sorted plain names, for messages (a list of members would show their repr)."""
    return sorted(str(s) for s in states)
