"""Imports sit at a module's top unless deferring one has a reason, and the module then says which and why.

An import inside a function hides a dependency from the module's header and from readers, so it must earn its
place: start-up time (a DAG file's parse, the triggerer, the command line's ``--help``, a Spark worker), an
optional dependency, an import that must follow an environment variable, or an import cycle. A module with any
function-level import carries one comment at the top level, before its first definition, starting with
``# Lazy imports:`` and naming the deferred imports and the reason. Every module under ``airflow_kafka_stream/``
is read with ``ast`` (nothing is imported); a failure names the module, the line and the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_kafka_stream

PACKAGE = Path(airflow_kafka_stream.__file__).parent
MARKER = "# Lazy imports:"


def function_level_imports(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, function, import) of every import inside a function or method, however deeply nested."""
    found: list[tuple[int, str, str]] = []

    def walk(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if function and isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child.lineno, function, ast.unparse(child)))
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            walk(child, inner)

    walk(tree, None)
    return found


def reason_line(source: str, tree: ast.Module) -> int | None:
    """The line of the module's ``# Lazy imports:`` comment with a reason after it, at the top level and before
    its first function or class; None without one."""
    first_definition = min((node.lineno for node in tree.body
                            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)),
                           default=len(source.splitlines()) + 1)
    for number, line in enumerate(source.splitlines()[:first_definition - 1], start=1):
        if line.startswith(MARKER) and line[len(MARKER):].strip():
            return number
    return None


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_function_level_import_has_its_module_say_why() -> None:
    missing = []
    for path in modules():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        if reason_line(source, tree) is not None:
            continue
        where = path.relative_to(PACKAGE.parent)
        missing += [f"{where}:{line}: {statement} (in {function}())"
                    for line, function, statement in function_level_imports(tree)]
    assert not missing, (
        f"imports inside functions in modules without a '{MARKER}' comment: move each to the module's top, or "
        f"keep it there and say which imports wait and why in one '{MARKER} ...' comment beside the module's "
        "imports:\n" + "\n".join(missing))


def test_no_module_keeps_a_stale_reason() -> None:
    stale = []
    for path in modules():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        line = reason_line(source, tree)
        if line is not None and not function_level_imports(tree):
            stale.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert not stale, f"'{MARKER}' comments in modules that import nothing inside a function:\n" + "\n".join(stale)
