"""The one table writer behind every table the CLI prints and the operators log."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.render.table import Column, dash, table

C = Column

# (id, columns, rows, sep, expected lines, why)
CASES = [
    ("01-widest-cell-wins", [C("A"), C("B")], [("xyz", "1")], "  ", ["A    B", "xyz  1"],
     "each column as wide as its widest cell, header included"),
    ("02-free-last-column", [C("A"), C("NOTE", free=True)], [("1", "a long note"), ("22", "")], "  ",
     ["A   NOTE", "1   a long note", "22"], "prose is not padded; an empty last cell leaves no trailing space"),
    ("03-right-aligned", [C("N", ">"), C("X")], [("5", "a"), ("100", "b")], " ", ["  N X", "  5 a", "100 b"],
     "numbers line up on the right"),
    ("04-least-width", [C("ID", width=6), C("S", free=True)], [("ab", "ok")], " ", ["ID     S", "ab     ok"],
     "a column keeps its least width when its cells are narrower"),
    ("05-least-width-grows", [C("ID", width=2), C("S", free=True)], [("abcd", "ok")], " ",
     ["ID   S", "abcd ok"], "a wider cell widens the column rather than break the alignment"),
    ("06-no-rows", [C("A"), C("B", free=True)], [], "  ", ["A  B"], "the header alone"),
    ("07-cells-as-text", [C("P", ">"), C("V")], [(3, None)], " ", ["P V", "3 None"], "cells are written with str"),
]


@pytest.mark.parametrize(("columns", "rows", "sep", "expected", "why"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_table(columns, rows, sep, expected, why):
    assert table(columns, rows, sep=sep) == expected, why


def test_a_row_of_the_wrong_length_is_a_bug():
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        table([C("A"), C("B"), C("C")], [("1", "2")])


def test_an_unknown_alignment_is_a_bug():
    with pytest.raises(ValueError, match="align"):
        C("A", "^")


@pytest.mark.parametrize(("value", "expected"), [(None, "-"), (0, "0"), (12, "12")], ids=["none", "zero", "number"])
def test_dash(value, expected):
    assert dash(value) == expected
