"""The one set of value parsers: switches and seconds, refused with the setting named."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.values import SPARK_FALSE_WORDS, SPARK_TRUE_WORDS, flag, seconds
from airflow_kafka_stream.errors import InvalidInputError


@pytest.mark.parametrize(("given", "expected"), [
    (True, True), (False, False), ("True", True), (" yes ", True), ("1", True), ("on", True),
    ("false", False), ("No", False), ("0", False), ("off", False), ("None", False), ("", False), (None, False),
])
def test_a_switch_given_as_a_bool_or_a_rendered_template(given, expected):
    assert flag(given, "drop_state") is expected


@pytest.mark.parametrize("given", ["maybe", "2", "tru", 5])
def test_a_switch_that_is_neither_is_refused_naming_the_setting(given):
    with pytest.raises(InvalidInputError, match=r"drop_state must be true or false, got") as raised:
        flag(given, "drop_state")
    assert raised.value.setting == "drop_state"


@pytest.mark.parametrize(("given", "expected"), [("true", True), ("FALSE", False)])
def test_a_spark_option_takes_the_words_spark_takes(given, expected):
    assert flag(given, "option failOnDataLoss", true_words=SPARK_TRUE_WORDS,
                false_words=SPARK_FALSE_WORDS) is expected
    with pytest.raises(InvalidInputError, match="option failOnDataLoss must be true or false, got 'yes'"):
        flag("yes", "option failOnDataLoss", true_words=SPARK_TRUE_WORDS, false_words=SPARK_FALSE_WORDS)


@pytest.mark.parametrize(("given", "expected"), [(1, 1.0), (0.5, 0.5), ("30", 30.0)])
def test_seconds(given, expected):
    assert seconds(given, "timeout_seconds") == expected


@pytest.mark.parametrize("given", [0, -1, "soon", None, True, float("nan"), float("inf")])
def test_seconds_that_are_not_positive_are_refused_naming_the_setting(given):
    with pytest.raises(InvalidInputError, match="timeout_seconds must be a positive number of seconds") as raised:
        seconds(given, "timeout_seconds")
    assert raised.value.setting == "timeout_seconds"


def test_zero_seconds_where_zero_is_allowed():
    assert seconds(0, "backoff_seconds", allow_zero=True) == 0.0
    with pytest.raises(InvalidInputError, match="backoff_seconds must be 0 or more seconds, got -1"):
        seconds(-1, "backoff_seconds", allow_zero=True)
