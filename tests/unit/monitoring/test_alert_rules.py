"""The shipped alerting rules (airflow_kafka_stream/monitoring/alerts.yml), checked and unit-tested by Prometheus's
own ``promtool`` (Debian's ``prometheus``, installed by scripts/setup-system), on series shaped like a driver's
export (its labels: ``stream_job``, ``app_version``; per partition ``topic`` and ``partition``; the scrape's
``instance`` and ``job``): each alert fires where a user expects it, and not where it must not (a stopped job, a
job catching up, a failover's new driver, an idle topic)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from airflow_kafka_stream.monitoring import ALERT_RULES

PROMTOOL = shutil.which("promtool")
JOB = {"app_version": "3", "instance": "driver-a:9464", "job": "kafka-stream-drivers"}
PREFIX = "airflow_kafka_stream_"


def series(metric: str, values: str, **labels: str) -> dict:
    """One input series: the job's labels, ``labels`` on top (a label given as "" is left out)."""
    merged = {**JOB, **labels}
    text = ",".join(f'{key}="{value}"' for key, value in sorted(merged.items()) if value != "")
    return {"series": f"{PREFIX}{metric}{{{text}}}", "values": values}


def descriptions() -> dict[str, str]:
    rules = yaml.safe_load(ALERT_RULES.read_text())["groups"][0]["rules"]
    return {rule["alert"]: rule["annotations"]["description"] for rule in rules}


def fired(alert: str, summary: str, **labels: str) -> dict:
    return {"exp_labels": labels, "exp_annotations": {"summary": summary, "description": descriptions()[alert]}}


def case(inputs: list[dict], checks: list[tuple[str, str, list[dict]]]) -> dict:
    return {"interval": "1m", "input_series": inputs,
            "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": alerts} for at, name, alerts in checks]}


def per_job(**labels: str) -> dict:
    return {**JOB, **labels}


CASES = {
    "lag objective: five minutes above two minutes pages; below it, or briefly above, does not": case(
        [series("lag_seconds", "150x10", stream_job="orders", topic="orders", partition="0"),
         series("lag_seconds", "30x10", stream_job="orders", topic="orders", partition="1"),
         series("lag_seconds", "100x10", stream_job="payments", topic="payments", partition="0"),
         series("lag_seconds", "150x2 0x8", stream_job="bursty", topic="bursty", partition="0")],
        [("4m", "StreamJobLagObjectiveBreached", []),
         ("6m", "StreamJobLagObjectiveBreached", [fired(
             "StreamJobLagObjectiveBreached", "orders: the oldest unprocessed record is 2m 30s old",
             stream_job="orders", severity="page")])]),
    "STOP: running, records waiting, no batch for the window; not idle, stopped or moving jobs": case(
        [series("batch_last_committed", "41x15", stream_job="orders"),
         series("lag_records", "50x15", stream_job="orders", topic="orders", partition="0"),
         series("up", "1x15", stream_job="orders"),
         series("batch_last_committed", "7x15", stream_job="idle"),
         series("lag_records", "0x15", stream_job="idle", topic="idle", partition="0"),
         series("up", "1x15", stream_job="idle"),
         series("batch_last_committed", "9x15", stream_job="stopped"),
         series("lag_records", "20x15", stream_job="stopped", topic="stopped", partition="0"),
         series("up", "0x15", stream_job="stopped"),
         series("batch_last_committed", "0+1x15", stream_job="moving"),
         series("lag_records", "50x15", stream_job="moving", topic="moving", partition="0"),
         series("up", "1x15", stream_job="moving")],
        [("12m", "StreamJobStopped", [fired("StreamJobStopped", "orders commits no batch while records wait",
                                            **per_job(stream_job="orders", severity="page"))])]),
    "STALL: batches commit but the records waiting grow; a job catching up is fine": case(
        [series("batch_last_committed", "0+1x30", stream_job="orders"),
         series("lag_records", "2000+100x30", stream_job="orders", topic="orders", partition="0"),
         series("batch_last_committed", "0+1x30", stream_job="catching-up"),
         series("lag_records", "5000-100x30", stream_job="catching-up", topic="c", partition="0")],
        [("15m", "StreamJobStalling", []),
         ("25m", "StreamJobStalling", [fired("StreamJobStalling", "orders commits batches but falls further behind",
                                             **per_job(stream_job="orders", severity="ticket"))])]),
    "REWIND: batch ids going back (a new generation) is said; ids going forward are not": case(
        [series("batch_last_committed", "10 11 12 0 1 2", stream_job="orders"),
         series("batch_last_committed", "0+1x5", stream_job="payments")],
        [("4m", "StreamJobRewound", [fired(
            "StreamJobRewound", "orders started a new checkpoint generation (its batch ids went back)",
            **per_job(stream_job="orders", severity="info"))])]),
    "a dead driver pages; a graceful stop and a failover's new driver do not": case(
        [series("state", "2x4 stale", stream_job="orders"),
         series("state", "2x3 0 stale", stream_job="stopped"),
         series("state", "2x4 stale", stream_job="failed-over"),
         series("state", "_x4 1 2x6", stream_job="failed-over", instance="driver-b:9464")],
        [("6m", "StreamJobDriverDead", [fired(
            "StreamJobDriverDead", "orders: no driver reports and the job was not stopped",
            **per_job(stream_job="orders", severity="page"))])]),
    "FAILED pages at once": case(
        [series("state", "2 4x3", stream_job="orders"), series("state", "2x4", stream_job="payments")],
        [("2m", "StreamJobFailed", [fired("StreamJobFailed", "orders FAILED",
                                          **per_job(stream_job="orders", severity="page"))])]),
    "group commits failing for good; some failures among successes are not": case(
        [series("group_commits_total", "100x20", stream_job="orders", outcome="succeeded"),
         series("group_commits_total", "0+5x20", stream_job="orders", outcome="failed"),
         series("group_commits_total", "0+10x20", stream_job="payments", outcome="succeeded"),
         series("group_commits_total", "0+1x20", stream_job="payments", outcome="failed")],
        [("16m", "StreamJobGroupCommitsFailing", [fired(
            "StreamJobGroupCommitsFailing", "orders: every commit to its consumer group fails",
            stream_job="orders", severity="ticket")])]),
    "savepoint older than two hours; a fresh one is fine": case(
        [series("savepoint_age_seconds", "7000+60x30", stream_job="orders"),
         series("savepoint_age_seconds", "100+60x30", stream_job="payments")],
        [("15m", "StreamJobSavepointOld", [fired(
            "StreamJobSavepointOld", "orders: the newest savepoint is 2h 11m 40s old",
            **per_job(stream_job="orders", severity="ticket"))])]),
    "a late heartbeat is said while it lasts": case(
        [series("heartbeat_age_seconds", "2 2 9 2", stream_job="orders")],
        [("2m", "StreamJobHeartbeatLate", [fired(
            "StreamJobHeartbeatLate", "orders: the driver has not written its status for 9s",
            **per_job(stream_job="orders", severity="ticket"))]),
         ("3m", "StreamJobHeartbeatLate", [])]),
}


@pytest.fixture(scope="module")
def promtool() -> str:
    assert PROMTOOL, "promtool is missing: run scripts/setup-system (apt-get install prometheus)"
    return PROMTOOL


def test_the_rules_are_valid(promtool):
    done = subprocess.run([promtool, "check", "rules", str(ALERT_RULES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout


def test_every_alert_has_a_case_that_fires_it():
    tested = {check["alertname"] for test in CASES.values() for check in test["alert_rule_test"] if check["exp_alerts"]}
    assert tested == set(descriptions()), set(descriptions()) - tested


@pytest.mark.parametrize("name", CASES)
def test_each_alert_fires_where_expected_and_nowhere_else(promtool, tmp_path: Path, name: str):
    tests = tmp_path / "alerts_test.yml"
    tests.write_text(json.dumps({"rule_files": [str(ALERT_RULES)], "evaluation_interval": "1m",
                                 "tests": [CASES[name]]}))  # JSON is YAML
    done = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert done.returncode == 0, f"{name}:\n{done.stdout}{done.stderr}"
