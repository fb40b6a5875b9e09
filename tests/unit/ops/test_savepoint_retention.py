"""A prune's retention policy is read once, in ops, for the CLI and the housekeeping operator alike."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.ops.savepoints import retention

# (id, keep_last, max_age, expected (keep_last, max_age) or (refusal fragment, setting), why)
CASES = [
    ("01-keep-last", 3, None, (3, None), "the newest three"),
    ("02-duration-text", None, "P7D", (None, timedelta(days=7)), "the CLI's --keep-within and the operator's text"),
    ("03-timedelta", 2, timedelta(hours=1), (2, timedelta(hours=1)), "a caller that already has a timedelta"),
    ("04-both-lowercase", 1, "pt30m", (1, timedelta(minutes=30)), "the one duration parser is case-blind"),
    ("05-nothing", None, None, ("say what to keep", "keep_last"), "a policy that keeps nothing is refused"),
    ("06-zero", 0, None, ("at least 1", "keep_last"), "the newest is always kept"),
    ("07-bool", True, None, ("at least 1", "keep_last"), "a switch is not a count"),
    ("08-text-count", "3", None, ("whole number", "keep_last"), "a templated count that stayed text"),
    ("09-bad-duration", None, "7 days", ("not an ISO 8601 duration", "max_age"), "named as the setting max_age"),
    ("10-weeks", None, "P1W", ("count in days", "max_age"), "weeks are not refused silently"),
]


@pytest.mark.parametrize(("keep_last", "max_age", "expected", "why"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_retention(keep_last, max_age, expected, why):
    if isinstance(expected[0], str):
        with pytest.raises(InvalidInputError, match=expected[0]) as info:
            retention(keep_last, max_age)
        assert info.value.setting == expected[1], why
        return
    assert retention(keep_last, max_age) == expected, why
