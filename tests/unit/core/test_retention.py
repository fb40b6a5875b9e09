"""Savepoint retention: keep the last N and/or those younger than an age; the newest always stays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.retention import expired_savepoints
from airflow_kafka_stream.errors import InvalidInputError

NOW = datetime(2026, 1, 10, tzinfo=UTC)
DAILY = [(f"sp{day}", datetime(2026, 1, day, tzinfo=UTC)) for day in range(1, 10)]  # sp1 oldest .. sp9 newest


@pytest.mark.parametrize(
    ("savepoints", "keep_last", "max_age", "expected"),
    [
        pytest.param(DAILY, None, None, [], id="no-limits-keep-everything"),
        pytest.param(DAILY, 3, None, [f"sp{d}" for d in range(1, 7)], id="keep-last-3"),
        pytest.param(
            DAILY, None, timedelta(days=3), ["sp1", "sp2", "sp3", "sp4", "sp5", "sp6"], id="younger-than-3-days"
        ),
        pytest.param(DAILY, 5, timedelta(days=3), [f"sp{d}" for d in range(1, 7)], id="either-limit-expires"),
        pytest.param(DAILY, None, timedelta(0), [f"sp{d}" for d in range(1, 9)], id="newest-kept-even-if-too-old"),
        pytest.param(list(reversed(DAILY)), 8, None, ["sp1"], id="input-order-does-not-matter"),
        pytest.param([], 1, timedelta(days=1), [], id="nothing-to-prune"),
    ],
)
def test_expired_savepoints(savepoints, keep_last, max_age, expected):
    assert expired_savepoints(savepoints, NOW, keep_last, max_age) == expected


@pytest.mark.parametrize(
    ("keep_last", "max_age"),
    [pytest.param(0, None, id="keep-zero-would-drop-newest"), pytest.param(None, timedelta(-1), id="negative-age")],
)
def test_bad_limits_rejected(keep_last, max_age):
    with pytest.raises(InvalidInputError):
        expired_savepoints(DAILY, NOW, keep_last, max_age)


def test_a_pinned_savepoint_never_expires():
    """An upgrade in progress may roll back to its savepoint: pruning must keep it whatever the limits."""
    from datetime import UTC, datetime, timedelta

    from airflow_kafka_stream.core.retention import expired_savepoints

    now = datetime(2026, 11, 23, tzinfo=UTC)
    saved = [(f"sp-{n}", now - timedelta(days=n)) for n in range(5)]
    assert expired_savepoints(saved, now, keep_last=1) == ["sp-4", "sp-3", "sp-2", "sp-1"]
    assert expired_savepoints(saved, now, keep_last=1, keep={"sp-3"}) == ["sp-4", "sp-2", "sp-1"]
