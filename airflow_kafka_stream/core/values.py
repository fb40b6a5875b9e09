"""The parsers of the values a user gives: operator arguments, command-line flags, rendered templates, options.

Each refuses bad input with :class:`~airflow_kafka_stream.errors.InvalidInputError` naming the setting, so
the command line can point at its flag and an operator at its parameter. Durations written as ISO 8601 text
have their own parser (``core.durations``).
"""

from __future__ import annotations

import math
from typing import Any

from airflow_kafka_stream.errors import InvalidInputError

#: The words a switch may be given as, e.g. a template ("{{ params.drop_state }}") rendered to text.
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off", "none", ""})
#: A Spark data source option's booleans: what Spark's own Kafka connector accepts (``"true"``/``"false"``).
SPARK_TRUE_WORDS, SPARK_FALSE_WORDS = frozenset({"true"}), frozenset({"false"})


def flag(value: Any, setting: str, *, true_words: frozenset[str] = TRUE_WORDS,
         false_words: frozenset[str] = FALSE_WORDS) -> bool:
    """A switch given as a bool or as text (case and surrounding blanks ignored)."""
    if isinstance(value, bool):
        return value
    text = "" if value is None else str(value).strip().lower()
    if text in true_words:
        return True
    if text in false_words:
        return False
    raise InvalidInputError(f"{setting} must be true or false, got {value!r}", setting=setting)


def seconds(value: Any, setting: str, *, allow_zero: bool = False) -> float:
    """A number of seconds: positive (or 0 too with ``allow_zero``), finite, given as a number or its text."""
    try:
        found = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        found = math.nan
    if math.isfinite(found) and (found > 0 or (allow_zero and found == 0)):
        return found
    wanted = "0 or more seconds" if allow_zero else "a positive number of seconds"
    raise InvalidInputError(f"{setting} must be {wanted}, got {value!r}", setting=setting)
