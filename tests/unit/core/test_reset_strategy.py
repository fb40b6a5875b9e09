"""StrategyKind is the one list of reset strategies: its value rules, and the front ends derived from it."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.reset_strategy import (
    StrategyKind,
    ValueKind,
    check_value,
    parse_strategy,
    strategy_kind,
)
from airflow_kafka_stream.errors import OffsetPlanError

K = StrategyKind

# (id, kind, value kind, user chooses it, why)
RULES = [
    ("01-to-current", K.TO_CURRENT, ValueKind.NONE, True, "the checkpoint's position needs nothing more"),
    ("02-to-offset", K.TO_OFFSET, ValueKind.TEXT, True, "an offset, offsets JSON or topic:partition=offset items"),
    ("03-to-datetime", K.TO_DATETIME, ValueKind.TEXT, True, "an ISO 8601 date-time"),
    ("04-to-earliest", K.TO_EARLIEST, ValueKind.NONE, True, "the low watermark needs nothing more"),
    ("05-to-latest", K.TO_LATEST, ValueKind.NONE, True, "the high watermark needs nothing more"),
    ("06-shift-by", K.SHIFT_BY, ValueKind.INTEGER, True, "a signed whole number: the CLI parses it as one"),
    ("07-by-duration", K.BY_DURATION, ValueKind.TEXT, True, "an ISO 8601 duration"),
    ("08-from-file", K.FROM_FILE, ValueKind.TEXT, True, "a CSV file's path (CLI, operator) or its text (core)"),
    ("09-to-savepoint", K.TO_SAVEPOINT, ValueKind.TEXT, True, "a savepoint id: now a strategy like the others"),
    ("10-to-recorded", K.TO_RECORDED, ValueKind.TEXT, False, "offsets JSON the operations build, never a user"),
]


@pytest.mark.parametrize(("kind", "value_kind", "user", "why"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_value_rule_of_each_strategy(kind, value_kind, user, why):
    assert kind.value_kind is value_kind, why
    assert kind.takes_value is (value_kind is not ValueKind.NONE), why
    assert kind.user_choice is user, why
    assert kind.summary and "--" not in kind.summary, "a summary says what it resets to, in no front end's words"
    assert bool(kind.value_hint) is kind.takes_value, "a strategy with a value says what value it needs"


def test_the_table_lists_every_strategy_once():
    assert [r[1] for r in RULES] == list(StrategyKind)


def test_user_choices_are_every_strategy_but_the_recorded_position_in_order():
    assert StrategyKind.choices() == tuple(r[1] for r in RULES if r[3])


# (id, text, user, expected kind or refusal fragment, why)
NAMES = [
    ("01-plain", "to-offset", False, K.TO_OFFSET, "the strategy's name"),
    ("02-flag-spelling", "--shift-by", False, K.SHIFT_BY, "as the CLI option writes it"),
    ("03-any-case", " TO-Latest ", False, K.TO_LATEST, "case and spaces do not matter"),
    ("04-member", K.TO_SAVEPOINT, True, K.TO_SAVEPOINT, "a member is itself"),
    ("05-recorded-internally", "to-recorded", False, K.TO_RECORDED, "the operations may build it"),
    ("06-recorded-by-a-user", "to-recorded", True, "use one of to-current, to-offset",
     "a user is offered the choices only"),
    ("07-recorded-member-by-a-user", K.TO_RECORDED, True, "unknown reset strategy 'to-recorded'",
     "a member a user may not choose is refused too"),
    ("08-unknown", "to-yesterday", True, "unknown reset strategy 'to-yesterday'", "no such strategy"),
    ("09-empty", "", False, "unknown reset strategy ''", "nothing chosen"),
]


@pytest.mark.parametrize(("text", "user", "expected", "why"), [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
def test_strategy_kind_of_a_name(text, user, expected, why):
    if isinstance(expected, StrategyKind):
        assert strategy_kind(text, user=user) is expected, why
        return
    with pytest.raises(OffsetPlanError, match=expected) as info:
        strategy_kind(text, user=user)
    assert info.value.settings == ("strategy",), why


# (id, kind, value, expected text or refusal fragment, why)
VALUES = [
    ("01-none-for-none", K.TO_EARLIEST, None, "", "no value, none taken"),
    ("02-blank-is-none", K.TO_CURRENT, "  ", "", "a blank value is no value"),
    ("03-value-kept", K.TO_DATETIME, " 2024-05-01T12:00:00Z ", "2024-05-01T12:00:00Z", "stripped"),
    ("04-integer-as-int", K.SHIFT_BY, -5, "-5", "the CLI gives shift-by as an int"),
    ("05-zero-is-a-value", K.SHIFT_BY, 0, "0", "0 is a shift, not a missing value"),
    ("06-missing", K.TO_SAVEPOINT, None, "needs a value \\(the id of one of the job's savepoints\\)",
     "says what value it needs"),
    ("07-extra", K.TO_LATEST, "5", "takes no value, got '5'", "a value the strategy would ignore is refused"),
]


@pytest.mark.parametrize(("kind", "value", "expected", "why"), [v[1:] for v in VALUES], ids=[v[0] for v in VALUES])
def test_check_value(kind, value, expected, why):
    if not expected.startswith(("needs", "takes")):
        assert check_value(kind, value) == expected, why
        return
    with pytest.raises(OffsetPlanError, match=expected) as info:
        check_value(kind, value)
    assert info.value.settings == ("value",), why


def test_to_savepoint_is_resolved_by_the_operation_not_parsed():
    with pytest.raises(OffsetPlanError, match="resolved from the savepoint's manifest") as info:
        parse_strategy("to-savepoint", "sp-1")
    assert info.value.settings == ("job_home", "strategy")


def test_front_ends_derive_their_strategies_from_the_enum():
    from airflow_kafka_stream import params
    from airflow_kafka_stream.cli import build_parser
    from airflow_kafka_stream.operators.reset import STRATEGIES

    names = [kind.value for kind in StrategyKind.choices()]
    assert list(STRATEGIES) == names and params.STRATEGIES == names
    reset = build_parser()._subparsers._group_actions[0].choices["reset"]
    group = next(g for g in reset._mutually_exclusive_groups if g.required)
    assert [a.option_strings[0] for a in group._group_actions] == [f"--{name}" for name in names]
    takes = {a.option_strings[0]: (a.nargs, a.type) for a in group._group_actions}
    assert takes["--to-current"][0] == 0 and takes["--shift-by"][1] is int and takes["--to-savepoint"][0] is None
