"""The shipped Grafana dashboard (airflow_kafka_stream/monitoring/dashboard.json) and the alerting rules name only
metrics a driver exports, under their Prometheus names (docs/metrics.md's table, which the driver's own tests
hold to the export), the dashboard shows every one of them, and each query is valid PromQL (``promtool``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from tests.metrics_doc import dashboard_queries, documented_metrics, shipped_alert_expressions

METRIC = re.compile(r"\bairflow_kafka_stream_[a-z_]+")


def test_they_name_only_exported_metrics_and_the_dashboard_shows_every_one():
    exported = set(documented_metrics().values())
    on_the_board = {name for query in dashboard_queries() for name in METRIC.findall(query)}
    in_the_rules = {name for expr in shipped_alert_expressions() for name in METRIC.findall(expr)}
    assert on_the_board - exported == set(), "the dashboard names metrics no driver exports"
    assert in_the_rules - exported == set(), "the alert rules name metrics no driver exports"
    assert exported - on_the_board == set(), "the dashboard leaves out exported metrics"


def test_every_panel_query_is_valid_promql(tmp_path: Path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run scripts/setup-system (apt-get install prometheus)"
    queries = [query.replace("$stream_job", ".*") for query in dashboard_queries() if not query.startswith("label_values")]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query{i}", "expr": query}
                                                        for i, query in enumerate(queries)]}]}
    (tmp_path / "queries.yml").write_text(json.dumps(rules))
    done = subprocess.run([promtool, "check", "rules", str(tmp_path / "queries.yml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
