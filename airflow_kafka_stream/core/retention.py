"""Which savepoints a retention policy lets go: a pure function over (id, created_at) with ``now`` passed in.

Like the Flink Kubernetes operator's savepoint history, a savepoint is removed
once it exceeds either limit (older than ``max_age`` or beyond the newest
``keep_last``), and the newest savepoint is always kept, whatever the limits.
So is every savepoint named in ``keep``: the one an upgrade in progress would
roll back to.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from airflow_kafka_stream.errors import InvalidInputError


def expired_savepoints(
    savepoints: Iterable[tuple[str, datetime]],
    now: datetime,
    keep_last: int | None = None,
    max_age: timedelta | None = None,
    keep: Iterable[str] = (),
) -> list[str]:
    """Ids to delete, oldest first. No limit given means nothing expires; ids in ``keep`` never do."""
    if keep_last is not None and keep_last < 1:
        raise InvalidInputError(f"keep_last must be at least 1 (the newest savepoint is always kept), got {keep_last}",
                                setting="keep_last")
    if max_age is not None and max_age < timedelta(0):
        raise InvalidInputError(f"max_age must not be negative, got {max_age}", setting="max_age")
    newest_first = sorted(savepoints, key=lambda item: (item[1], item[0]), reverse=True)
    pinned = set(keep)
    expired = []
    for rank, (savepoint_id, created_at) in enumerate(newest_first):
        if rank == 0 or savepoint_id in pinned:
            continue
        too_many = keep_last is not None and rank >= keep_last
        too_old = max_age is not None and now - created_at > max_age
        if too_many or too_old:
            expired.append(savepoint_id)
    return expired[::-1]
