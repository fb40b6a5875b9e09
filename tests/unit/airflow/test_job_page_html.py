"""The job page's HTML: what a person reads, every value escaped, the lag plot drawn from the samples."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from airflow_kafka_stream.plugins.job_page_html import age, lag_plot, page

VIEW = {
    "job_home": "/jobs/<script>alert(1)</script>",
    "errors": {"partitions": "Kafka connection 'kafka_default': not found"},
    "summary": {"job": "orders", "state": "RUNNING", "app_version": "2", "heartbeat_age_seconds": 1.25,
                "generation": 3, "last_batch_id": 41, "group": "g", "topics": ["orders"], "error": None,
                "read_placement": "readMode=auto: batches of up to 20000 records are read on the driver"},
    "partitions": None,
    "lag_samples": [[1000.0, 40, 120], [1005.0, 41, 30]],
    "savepoints": [{"id": "sp-20261122T101500Z-b41", "batch_id": 41, "created_at": "2026-11-22T10:15:00+00:00",
                    "app_version": "1", "size_bytes": 5120, "valid": True, "problem": None}],
    "history": [],
}


def test_a_job_section_shows_summary_savepoints_and_the_error_of_a_part_that_failed():
    html = page("Stream jobs", [VIEW])
    for seen in ("RUNNING", "1.2 s", "Where batches are read",
                 "readMode=auto: batches of up to 20000 records are read on the driver", "sp-20261122T101500Z-b41", "5.0 KiB", "valid",
                 "partitions: Kafka connection &#x27;kafka_default&#x27;: not found", "No operation recorded yet."):
        assert seen in html, seen
    assert "<script>" not in html and "&lt;script&gt;" in html, "values are escaped"


def test_the_job_shows_its_sink_its_last_committed_kafka_batch_and_its_output_assets_windows():
    summary = {**VIEW["summary"], "sink": "transactional Kafka sink at kafka://b:9092/orders-out: ...",
               "kafka_sink": {"last_committed": {"generation": 2, "batch_id": 41},
                              "transactions": {"committed": 40, "aborted": 1, "fenced": 0, "skipped": 1}},
               "assets": {"uri": "file:///lake/orders", "announced_through": "2026-11-30T08:00:00+00:00",
                          "waiting": 0, "error": None}}
    html = page("Stream jobs", [{**VIEW, "summary": summary}])
    for seen in ("transactional Kafka sink at kafka://b:9092/orders-out",
                 "last committed batch 41 (generation 2); transactions this run: 40 committed, 1 aborted, 0 fenced, "
                 "1 skipped", "file:///lake/orders: announced through 2026-11-30T08:00:00+00:00, 0 window(s) waiting"):
        assert seen in html, seen
    skipping = {**summary, "kafka_sink": {**summary["kafka_sink"], "skip_replays": True,
                                          "replays_skipped_this_run": 60}}
    assert "skips replays (60 replayed record(s) skipped this run)" in page("Stream jobs", [{**VIEW,
                                                                                           "summary": skipping}])
    assert "skips replays" not in html
    fenced = {**summary, "kafka_sink": {**summary["kafka_sink"], "transactions": {"fenced": 1}}}
    assert '<td class="bad">last committed batch 41' in page("Stream jobs", [{**VIEW, "summary": fenced}])


def test_the_lag_plot_draws_every_sample_and_writes_the_newest_value():
    svg = lag_plot([[1000.0, 40, 120], [1005.0, 41, 30], [1010.0, 42, 0]])
    assert "Lag at the last batch: <b>0</b> records (peak 120, 3 batches)" in svg
    points = svg.split('points="')[1].split('"')[0].split()
    assert len(points) == 3
    assert float(points[0].split(",")[1]) < float(points[2].split(",")[1]), "higher lag is drawn higher"
    assert "No lag sample yet" in lag_plot([])


def test_no_job_home_known_says_where_they_come_from():
    assert "job_homes" in page("Stream jobs", [])


NOW = datetime(2026, 11, 22, 10, 18, 30, tzinfo=UTC)
TIMED = {**VIEW, "savepoints": [{**VIEW["savepoints"][0], "created_at": "2026-11-22T10:15:00.149272+00:00"}],
         "history": [{"started_at": "2026-11-22T07:18:29.999999+00:00", "operation": "stop", "by": "airflow",
                      "result": "ok", "seconds": 3.2, "args": "{}", "error": None}]}


@pytest.mark.parametrize(("tz", "created", "started"), [
    # id: UTC, the default zone: to the second, microseconds gone, the age beside it.
    (UTC, "2026-11-22 10:15:00 UTC (3 min ago)", "2026-11-22 07:18:29 UTC (3 h ago)"),
    # a configured zone: the same moments as a person there reads them.
    (ZoneInfo("Europe/Amsterdam"), "2026-11-22 11:15:00 CET (3 min ago)", "2026-11-22 08:18:29 CET (3 h ago)"),
])
def test_savepoint_and_history_times_are_shown_to_the_second_in_the_ui_zone_with_their_age(tz, created, started):
    html = page("Stream jobs", [TIMED], tz=tz, now=NOW)
    savepoints = html.split('class="savepoints"')[1].split("</table>")[0]
    history = html.split('class="history"')[1].split("</table>")[0]
    assert created in savepoints and started in history, (savepoints, history)
    assert ".149272" not in savepoints.replace('title="2026-11-22T10:15:00.149272+00:00"', ""), "no microseconds shown"
    assert 'title="2026-11-22T10:15:00.149272+00:00"' in savepoints, "the exact value on hover"


@pytest.mark.parametrize(("seconds", "said", "why"), [
    (0.4, "0 s ago", "under a minute: seconds"),
    (59, "59 s ago", "still seconds"),
    (60, "1 min ago", "a minute"),
    (3599, "59 min ago", "minutes up to the hour"),
    (7200, "2 h ago", "hours"),
    (86400 + 3600, "25 h ago", "hours up to two days: a day and a bit reads better in hours"),
    (3 * 86400, "3 days ago", "days"),
    (-2, "just now", "a clock a little ahead is no future"),
    (-60, "in the future: clocks differ", "a clock far ahead says so"),
])
def test_the_age_is_said_in_its_largest_whole_unit(seconds, said, why):
    assert age(NOW, NOW - timedelta(seconds=seconds)) == said, why


def test_the_json_api_keeps_the_exact_value():
    """The view (the JSON API's answer) is not touched by rendering: scripts get the value as recorded."""
    view = json.loads(json.dumps(TIMED))
    page("Stream jobs", [view], tz=ZoneInfo("Europe/Amsterdam"), now=NOW)
    assert view["savepoints"][0]["created_at"] == "2026-11-22T10:15:00.149272+00:00"
    assert view == TIMED


def test_the_groups_members_are_shown_as_other_consumers():
    """The job never joins its group: a member is someone else using its group id, named by client id and host."""
    member = {"member_id": "m-1", "client_id": "console-<b>", "host": "/10.1.4.7", "group_instance_id": None,
              "assignment": ["orders:0", "orders:1"]}
    busy = page("Stream jobs", [{**VIEW, "group": {"group": "g", "state": "Stable", "protocol": "consumer",
                                                   "members": [member]}}])
    for seen in ("Consumer group members", "Stable (consumer protocol)", "console-&lt;b&gt;", "/10.1.4.7",
                 "orders:0, orders:1", "reset or restore is refused"):
        assert seen in busy, seen
    free = page("Stream jobs", [{**VIEW, "group": {"group": "g", "state": "Empty", "protocol": "classic",
                                                   "members": []}}])
    assert "no other consumer uses it" in free and "Client id" not in free
