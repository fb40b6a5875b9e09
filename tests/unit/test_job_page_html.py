"""The job page's HTML: what a person reads, every value escaped, the lag plot drawn from the samples."""

from __future__ import annotations

from airflow_kafka_stream.plugins.job_page_html import lag_plot, page

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


def test_the_lag_plot_draws_every_sample_and_writes_the_newest_value():
    svg = lag_plot([[1000.0, 40, 120], [1005.0, 41, 30], [1010.0, 42, 0]])
    assert "Lag at the last batch: <b>0</b> records (peak 120, 3 batches)" in svg
    points = svg.split('points="')[1].split('"')[0].split()
    assert len(points) == 3
    assert float(points[0].split(",")[1]) < float(points[2].split(",")[1]), "higher lag is drawn higher"
    assert "No lag sample yet" in lag_plot([])


def test_no_job_home_known_says_where_they_come_from():
    assert "job_homes" in page("Stream jobs", [])
