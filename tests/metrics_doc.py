"""The driver's metrics as docs/metrics.md lists them: the one list the tests hold the code and the exports to.

:func:`documented_metrics` reads the table under "OpenTelemetry metrics" (its first two columns, the
OpenTelemetry name and the Prometheus name). The unit test checks it against ``metric_values.METRICS``; the
integration tests wait for every one of them at an OTLP receiver, on the Prometheus endpoint and through a
Prometheus server, so a metric that is documented but never exported, or exported but not documented, fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from airflow_kafka_stream.monitoring import ALERT_RULES, DASHBOARD

DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
HEADER = "| metric (OpenTelemetry) | Prometheus |"


def documented_metrics() -> dict[str, str]:
    """OpenTelemetry name -> Prometheus name, for every row of the driver's metrics table."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    found: dict[str, str] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        otel, prometheus = (re.fullmatch(r"`([^`]+)`", cell) for cell in cells[:2])
        assert otel and prometheus, f"docs/metrics.md: a metrics row without two `names`: {line}"
        found[otel.group(1)] = prometheus.group(1)
    return found


def _block(language: str) -> list[str]:
    """The lines of docs/metrics.md's first ```language block."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"```{language}")
    return lines[start + 1:lines.index("```", start + 1)]


def documented_queries() -> list[str]:
    """The PromQL of the Grafana panels the docs give (comments left out)."""
    return [line.strip() for line in _block("promql") if line.strip() and not line.lstrip().startswith("#")]


def shipped_alert_expressions() -> list[str]:
    """The ``expr`` of every alerting rule the package ships (airflow_kafka_stream/monitoring/alerts.yml)."""
    return [rule["expr"] for rule in yaml.safe_load(ALERT_RULES.read_text())["groups"][0]["rules"]]


def dashboard_queries() -> list[str]:
    """The PromQL of the shipped Grafana dashboard's panels and of its job variable."""
    board = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in board["panels"] for target in panel["targets"]]
    return queries + [variable["definition"] for variable in board["templating"]["list"] if variable.get("definition")]
