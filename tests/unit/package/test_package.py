"""The package installs as an Airflow provider with a console script (its layers and module sizes: test_layers.py)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import airflow_kafka_stream


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
    root = Path(__file__).resolve().parents[3]
    for guide in info["integrations"][0]["how-to-guide"]:
        assert (root / guide).is_file(), guide


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
