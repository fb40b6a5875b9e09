"""The package installs as an Airflow provider with a console script, and core/ stays pure."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import airflow_kafka_stream

CORE = Path(airflow_kafka_stream.__file__).parent / "core"
FORBIDDEN = ("airflow", "confluent_kafka", "pyspark", "fsspec")


def test_provider_entry_point_returns_provider_info():
    eps = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_kafka_stream")]
    assert len(eps) == 1, "setup.py must register exactly one apache_airflow_provider entry point"
    info = eps[0].load()()
    assert info["package-name"] == "airflow-kafka-stream"
    assert airflow_kafka_stream.__version__ in info["versions"]


def test_airflow_providers_manager_lists_the_provider():
    from airflow.providers_manager import ProvidersManager

    assert "airflow-kafka-stream" in ProvidersManager().providers


def test_console_script_prints_help():
    exe = Path(sys.executable).parent / "airflow-kafka-stream"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for command in ("checkpoint", "verify", "reset", "stop", "savepoint", "restore"):
        assert command in out.stdout


@pytest.mark.parametrize("module", sorted(p.name for p in CORE.glob("*.py")))
def test_core_imports_no_io_frameworks(module):
    """core/ could be published alone: it must not import Airflow, Kafka clients, Spark or fsspec."""
    tree = ast.parse((CORE / module).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & set(FORBIDDEN), f"core/{module} imports {imported & set(FORBIDDEN)}"


def test_provider_info_lists_modules_that_import():
    """Every module get_provider_info names exists, so Airflow's provider listing never breaks on it."""
    import importlib

    info = airflow_kafka_stream.get_provider_info()
    modules = [m for kind in ("hooks", "operators", "sensors", "triggers") for entry in info[kind]
               for m in entry["python-modules"]]
    assert len(modules) >= 12
    for module in modules:
        importlib.import_module(module)
    for path in info["extra-links"]:
        module, _, name = path.rpartition(".")
        assert getattr(importlib.import_module(module), name).name
    root = Path(__file__).resolve().parents[2]
    for guide in info["integrations"][0]["how-to-guide"]:
        assert (root / guide).is_file(), guide


PACKAGE = Path(airflow_kafka_stream.__file__).parent


def _imports(path: Path) -> list[str]:
    """Every module a file imports, at its top or inside a function (``from . import x`` counts as ``.x``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _offending(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{package}/{path.name} imports {name}" for path in sorted((PACKAGE / package).glob("*.py"))
            for name in _imports(path) if name in forbidden or name.startswith(tuple(f"{f}." for f in forbidden))]


def test_ops_does_not_import_the_source_or_the_runtime():
    """ops/ (the operation API) never imports the driver side, which is started by it, not called."""
    assert not _offending("ops", ("airflow_kafka_stream.source", "airflow_kafka_stream.runtime",
                                  "airflow_kafka_stream.spark"))


ABOVE_THE_DRIVER = tuple(f"airflow_kafka_stream.{layer}" for layer in
                         ("ops", "operators", "hooks", "triggers", "sensors", "plugins", "cli")) + ("airflow",)


def test_the_source_imports_neither_the_runtime_nor_the_control_plane():
    """What ships to executors needs nothing of the driver runtime, the control plane or Airflow."""
    assert not _offending("source", ("airflow_kafka_stream.runtime", "airflow_kafka_stream.spark",
                                     *ABOVE_THE_DRIVER))


def test_the_runtime_does_not_import_the_control_plane():
    """The driver runtime sits below ops (it records its start through storage.operation) and Airflow."""
    assert not _offending("runtime", ("airflow_kafka_stream.spark", *ABOVE_THE_DRIVER))


@pytest.mark.parametrize("package", ["source", "runtime"])
def test_source_and_runtime_modules_stay_small(package):
    """Each module holds one job: none above 400 lines."""
    sizes = {path.name: len(path.read_text().splitlines()) for path in (PACKAGE / package).glob("*.py")}
    assert not {name: lines for name, lines in sizes.items() if lines > 400}


def test_provider_info_follows_airflows_schema_and_declares_its_settings():
    """Airflow validates provider info against its schema; the settings the operators read have declared defaults."""
    import json

    import airflow
    import jsonschema
    from airflow.configuration import conf

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(airflow_kafka_stream.get_provider_info(), schema)
    assert conf.get("airflow_kafka_stream", "defer_after_seconds") == "30"
    assert conf.get("airflow_kafka_stream", "executor_environment") == ""
