"""Reading one option's value: text, whole numbers and booleans, refused with the option's name.

Spark lower-cases option names, so ``opts`` is keyed by lower-case names and ``name`` is looked up
lower-cased; the refusal names the option as the documentation spells it.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_kafka_stream.core.values import SPARK_FALSE_WORDS, SPARK_TRUE_WORDS, flag
from airflow_kafka_stream.errors import InvalidInputError


def text(opts: Mapping[str, str], name: str) -> str | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def non_negative_int(opts: Mapping[str, str], name: str, default: int) -> int:
    number = whole_number(opts, name, 0, "a whole number of 0 or more")
    return default if number is None else number


def positive_int(opts: Mapping[str, str], name: str) -> int | None:
    return whole_number(opts, name, 1, "a positive integer")


def whole_number(opts: Mapping[str, str], name: str, minimum: int, wording: str) -> int | None:
    """The option as an int of at least ``minimum``; None when it is not given."""
    value = text(opts, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise InvalidInputError(f"option {name} must be {wording}, got {value!r}")
    return number


def boolean(opts: Mapping[str, str], name: str, default: bool) -> bool:
    """The option as Spark's Kafka connector reads a boolean (``true`` or ``false``, any case)."""
    value = text(opts, name)
    if value is None:
        return default
    return flag(value, f"option {name}", true_words=SPARK_TRUE_WORDS, false_words=SPARK_FALSE_WORDS)
