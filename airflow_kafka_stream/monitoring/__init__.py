"""Prometheus alerting rules and a Grafana dashboard for the driver's metrics (docs/metrics.md), shipped with the
package so that a platform team loads them as they are: ``promtool check rules`` accepts :data:`ALERT_RULES`,
Grafana imports :data:`DASHBOARD`."""

from __future__ import annotations

from pathlib import Path

#: The alerting rules file (one group, ``airflow-kafka-stream``).
ALERT_RULES = Path(__file__).with_name("alerts.yml")
#: The Grafana dashboard (JSON model, a Prometheus data source chosen at import).
DASHBOARD = Path(__file__).with_name("dashboard.json")
