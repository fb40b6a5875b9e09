"""The core rules about a job's status take a StatusDocument: only core.status_document reads the raw mapping."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import airflow_kafka_stream.core as core

CORE = Path(core.__file__).parent
#: The one module that parses the raw ``status.json`` (``StatusDocument.parse``).
PARSER = "status_document.py"
MODULES = sorted(path for path in CORE.glob("*.py") if path.name != PARSER)


def _is_status(node: ast.AST) -> bool:
    """``status``, or ``(status or {})`` and the like."""
    if isinstance(node, ast.Name):
        return node.id == "status"
    return isinstance(node, ast.BoolOp) and any(_is_status(value) for value in node.values)


def raw_reads(source: str) -> list[str]:
    """Where ``source`` reads a status as a raw mapping: ``status.get(...)``, ``status[...]``, ``status.raw``,
    ``(status or {}).get(...)``; and parameters named ``status`` not annotated as a StatusDocument."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_status(node.value):
            found.append((node.lineno, "status[...]"))
        elif isinstance(node, ast.Attribute) and _is_status(node.value) and node.attr in ("get", "raw", "items",
                                                                                          "keys", "values"):
            found.append((node.lineno, f"status.{node.attr}"))
        elif isinstance(node, ast.arg) and node.arg == "status":
            annotation = ast.unparse(node.annotation) if node.annotation is not None else ""
            if "StatusDocument" not in annotation or "Mapping" in annotation or "dict" in annotation:
                found.append((node.lineno, f"parameter status: {annotation or 'unannotated'}"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_the_scan_finds_raw_reads():
    source = ("def f(status: Mapping[str, Any] | None):\n"
              "    a = status.get('state')\n"
              "    b = status['pid']\n"
              "    c = (status or {}).get('started_at')\n"
              "    d = status.raw\n"
              "def g(status: StatusDocument | None):\n"
              "    return status.state_text\n")
    assert [line.split(":")[0] for line in raw_reads(source)] == ["line 1", "line 2", "line 3", "line 4", "line 5"]


def test_the_core_modules_are_all_scanned():
    names = {path.name for path in MODULES}
    assert {"job_watch.py", "liveness.py", "submit_rules.py", "watchdog.py", "health.py"} <= names
    assert PARSER not in names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_core_rule_reads_a_raw_status(path):
    found = raw_reads(path.read_text(encoding="utf-8"))
    assert not found, (f"core/{path.name} reads a raw status; take a StatusDocument (core.status_document) "
                       f"and parse at the caller's edge: {found}")
