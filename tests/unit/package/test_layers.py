"""The package's layers, as a test: each rule says which modules may not import what, and why.

Every module under ``airflow_kafka_stream/`` is read with ``ast`` (nothing is imported to find its imports),
and every import counts: at the top of the module or inside a function, ``import x`` and ``from x import y``
(which imports ``x`` and, when ``y`` is a module, ``x.y`` too). A failure names the rule, the module, the
line and the import. ``docs/architecture.md`` draws the same layers.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

import airflow_kafka_stream

PACKAGE = Path(airflow_kafka_stream.__file__).parent
NAME = airflow_kafka_stream.__name__

#: Third-party frameworks, by their top-level package.
KAFKA_CLIENTS = ("confluent_kafka",)
SPARK = ("pyspark", "py4j")
AIRFLOW = ("airflow",)
STORAGE_CLIENTS = ("fsspec",)

#: No module may exceed this many lines: one module, one job.
MAX_MODULE_LINES = 400


def ours(*layers: str) -> tuple[str, ...]:
    """This package's modules of ``layers`` (top-level packages or modules of airflow_kafka_stream)."""
    return tuple(f"{NAME}.{layer}" for layer in layers)


#: Every top-level package and module of airflow_kafka_stream (a rule's "anything but" is taken from it).
LAYERS = tuple(sorted(path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()
                      if (path.is_dir() and (path / "__init__.py").exists())
                      or (path.suffix == ".py" and path.stem != "__init__")))

#: The Airflow front end and the command line: nothing below them may call up into them.
CONTROL_PLANE_FRONTS = ("operators", "hooks", "triggers", "sensors", "tasks", "plugins", "links", "cli")


@dataclass(frozen=True)
class Rule:
    """Modules of ``layers`` must not import anything in ``forbidden`` (a module or a package and all in it)."""

    id: str
    layers: tuple[str, ...]
    forbidden: tuple[str, ...]
    reason: str


RULES = (
    Rule("core-is-pure", ("core",),
         KAFKA_CLIENTS + SPARK + AIRFLOW + STORAGE_CLIENTS
         + ours(*(layer for layer in LAYERS if layer not in ("core", "errors"))),
         "core/ holds the rules and documents of the product: it could be published alone, tested without a "
         "broker, a cluster, Airflow or a filesystem, so it imports only itself and errors"),
    Rule("storage-below-kafka-and-drivers", ("storage", "checkpoint"),
         AIRFLOW + ours("kafka", "source", "runtime", "spark", "ops", *CONTROL_PLANE_FRONTS),
         "the job home and the checkpoint files are read by every layer above and by the driver: they must not "
         "depend on a broker, the driver side or the operations that use them"),
    Rule("driver-below-operations", ("source", "runtime", "spark"),
         AIRFLOW + ours("ops", *CONTROL_PLANE_FRONTS),
         "the driver and what ships to executors are started by the control plane, never call it: a job runs "
         "without Airflow installed (the runtime records its start through storage.operation)"),
    Rule("applications-are-drivers", ("jobs",),
         AIRFLOW + ours("ops", *CONTROL_PLANE_FRONTS),
         "jobs/ holds the example pipeline, a PySpark application like the users' own: it runs under the "
         "runtime on a driver, reads its client settings through runtime/kafka, and needs nothing of the "
         "control plane"),
    Rule("source-below-runtime", ("source",),
         ours("runtime"),
         "source/ ships to executors and needs nothing of the driver runtime"),
    Rule("nothing-imports-the-aliases", tuple(layer for layer in LAYERS if layer != "spark"),
         ours("spark"),
         "spark/ only keeps the old import paths of jobs working (it re-exports source/ and runtime/): the package "
         "itself imports the modules where the code lives"),
    Rule("operations-do-not-call-the-driver", ("ops",),
         ours("source", "runtime", "spark", *CONTROL_PLANE_FRONTS) + AIRFLOW,
         "ops/ is the one operation API the CLI and Airflow both call: it starts drivers through a launcher, "
         "it does not import the driver side, nor Airflow (hooks/spark_driver.py adapts SparkSubmitHook)"),
    Rule("sensors-below-operators", ("sensors", "tasks"),
         ours("operators"),
         "operators build task groups out of sensors (the upgrade's health gate), so a sensor never imports an "
         "operator: what both need lives in tasks/"),
    Rule("tasks-below-sensors", ("tasks",),
         ours("sensors"),
         "tasks/ holds what operators and sensors share; it imports neither"),
    Rule("airflow-tasks-through-hooks-and-ops", ("operators", "sensors", "triggers", "tasks"),
         ours("storage", "kafka"),
         "operators, sensors and triggers only translate Airflow's parameters: the job home and the broker are "
         "reached through hooks.stream_job.StreamJobHook and the operations of ops/, so each decision is made "
         "once for the CLI and Airflow"),
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    path: Path
    line: int
    name: str  # the module imported (``from x import y`` gives x, and x.y)
    source: str  # the statement as written

    def __str__(self) -> str:
        return f"{self.module} (line {self.line}): {self.source}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def _resolve(module: str, path: Path, level: int, name: str | None) -> str:
    """A relative import's absolute name."""
    if not level:
        return name or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_of(path: Path) -> list[Import]:
    """Every import of a module: at its top and inside functions, ``import x`` and ``from x import y``."""
    return imports_in(path.read_text(), module_name(path), path)


def imports_in(text: str, module: str, path: Path) -> list[Import]:
    found = []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            source = ast.get_source_segment(text, node)
            found.extend(Import(module, path, node.lineno, alias.name, source) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = ast.get_source_segment(text, node)
            base = _resolve(module, path, node.level, node.module)
            found.append(Import(module, path, node.lineno, base, source))
            found.extend(Import(module, path, node.lineno, f"{base}.{alias.name}", source) for alias in node.names)
    return found


def in_layer(module: str, layers: tuple[str, ...]) -> bool:
    return any(module == f"{NAME}.{layer}" or module.startswith(f"{NAME}.{layer}.") for layer in layers)


def matches(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name == f or name.startswith(f"{f}.") for f in forbidden)


def violations(rule: Rule) -> list[Import]:
    seen, found = set(), []
    for path in package_modules():
        if not in_layer(module_name(path), rule.layers):
            continue
        for imported in imports_of(path):
            if matches(imported.name, rule.forbidden) and (imported.line, imported.source) not in seen:
                seen.add((imported.line, imported.source))
                found.append(imported)
    return found


@pytest.mark.parametrize("rule", RULES, ids=[rule.id for rule in RULES])
def test_layer_rule(rule):
    assert [path for path in package_modules() if in_layer(module_name(path), rule.layers)], \
        f"rule {rule.id} covers no module: a layer was renamed"
    offending = violations(rule)
    assert not offending, (f"layer rule {rule.id} ({rule.reason}) is broken by:\n  "
                           + "\n  ".join(str(found) for found in offending))


def test_sensors_import_only_trigger_classes_from_triggers():
    """A sensor may import a trigger class to defer to it, nothing else from a triggers module: what both
    need (a look, a rule) lives in ops/ or on the hook, not in a trigger's internals."""
    from airflow.triggers.base import BaseTrigger

    offending = []
    for path in package_modules():
        if not in_layer(module_name(path), ("sensors",)):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(matches(a.name, ours("triggers")) for a in node.names):
                offending.append(f"{module_name(path)} (line {node.lineno}): imports a triggers module whole")
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module_name(path), path, node.level, node.module)
                if not matches(base, ours("triggers")):
                    continue
                module = importlib.import_module(base)
                for alias in node.names:
                    value = getattr(module, alias.name, None)
                    if not (isinstance(value, type) and issubclass(value, BaseTrigger)):
                        offending.append(f"{module_name(path)} (line {node.lineno}): from {base} import "
                                         f"{alias.name}, which is not a trigger class")
    assert not offending, "sensors reach into triggers' internals:\n  " + "\n  ".join(offending)


def test_the_walk_sees_every_import_and_names_its_line():
    """Imports inside functions count, both forms do, and a relative import is resolved: a rule cannot be
    dodged by moving an import into a function or spelling it relatively."""
    text = ("import os\n\n"
            "def f():\n"
            "    from airflow_kafka_stream.storage import jobhome\n"
            "    import pyspark.sql\n"
            "    from ..triggers.health import StreamJobHealthTrigger\n")
    path = PACKAGE / "core" / "probe.py"
    found = imports_in(text, "airflow_kafka_stream.core.probe", path)
    core = next(rule for rule in RULES if rule.id == "core-is-pure")
    assert sorted({(i.line, i.source) for i in found if matches(i.name, core.forbidden)}) == [
        (4, "from airflow_kafka_stream.storage import jobhome"), (5, "import pyspark.sql"),
        (6, "from ..triggers.health import StreamJobHealthTrigger")]
    assert "airflow_kafka_stream.triggers.health" in {i.name for i in found}
    assert str(found[1]) == "airflow_kafka_stream.core.probe (line 4): from airflow_kafka_stream.storage import jobhome"


def test_no_module_exceeds_the_size_limit():
    """Each module holds one job: none above MAX_MODULE_LINES lines (the C extension's source is not Python)."""
    sizes = {module_name(path): len(path.read_text().splitlines()) for path in package_modules()}
    assert not {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}


def _module_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of it that it imports (a package's __init__ aside)."""
    modules = {module_name(path): path for path in package_modules()}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        for imported in imports_of(path):
            name = imported.name
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and modules[name].name != "__init__.py":
                graph[module].add(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_two_modules_import_each_other():
    """No import cycle between modules, through any number of them and imports inside functions too: each
    module can be read (and tested) after the ones it uses. The source's data source and its driver reader
    imported each other until the planner moved to source/stream_reader.py."""
    assert _cycles(_module_graph()) == []


def test_the_cycle_finder_finds_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


#: Layers whose modules name every module of this package they use in their header: nothing there is on a
#: path where start-up time matters (the CLI's parser, a DAG file's parse), so no import waits in a function.
HEADER_IMPORTS_ONLY = ("core", "storage", "kafka", "checkpoint", "cluster", "ops")


def test_modules_of_the_lower_layers_import_this_package_at_their_top():
    offending = []
    for path in package_modules():
        if not in_layer(module_name(path), HEADER_IMPORTS_ONLY):
            continue
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top:
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(matches(name, (NAME,)) for name in names) and not _in_type_checking(tree, node):
                    offending.append(f"{module_name(path)} (line {node.lineno})")
    assert not offending, "imports of this package inside functions (move them to the module's top):\n  " + \
        "\n  ".join(offending)


def _in_type_checking(tree: ast.Module, node: ast.AST) -> bool:
    """Whether ``node`` sits in an ``if TYPE_CHECKING:`` block at the module's top."""
    return any(isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
               and node in ast.walk(block) for block in tree.body)
