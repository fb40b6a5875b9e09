"""The one fixed-width table writer: columns padded to their widest cell, a free last column of prose."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One column: its title, ``<`` (left) or ``>`` (right) alignment, and the least width it takes.

    ``free`` leaves the cells unpadded: a last column of prose (a note, a status detail).
    """

    title: str
    align: str = "<"
    width: int = 0
    free: bool = False

    def __post_init__(self) -> None:
        if self.align not in ("<", ">"):
            raise ValueError(f"column {self.title!r}: align must be '<' or '>', got {self.align!r}")


def table(columns: Sequence[Column], rows: Iterable[Sequence[object]], sep: str = "  ") -> list[str]:
    """The header line and one line per row; each column as wide as its widest cell (and its ``width``).

    Cells are written with ``str``; trailing spaces are cut from every line.
    """
    grid = [[column.title for column in columns], *([str(cell) for cell in row] for row in rows)]
    for row in grid:
        if len(row) != len(columns):
            raise ValueError(f"a row has {len(row)} cells for {len(columns)} columns: {row}")
    widths = [max([column.width, *(len(row[i]) for row in grid)]) for i, column in enumerate(columns)]
    lines = []
    for row in grid:
        cells = [cell if column.free else cell.rjust(width) if column.align == ">" else cell.ljust(width)
                 for cell, width, column in zip(row, widths, columns, strict=True)]
        lines.append(sep.join(cells).rstrip())
    return lines


def dash(value: object | None) -> str:
    """A cell for a value that may be missing: ``-`` for None."""
    return "-" if value is None else str(value)
