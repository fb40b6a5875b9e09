"""The job page's State section and its "Take a savepoint now" action (the route, with Airflow's checks stubbed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_kafka_stream.plugins.job_page_html import page
from airflow_kafka_stream.plugins.state_html import savepoint_actions, state_section

STATE = {
    "checkpoint": "/jobs/orders/checkpoints/0001", "batch_id": 8, "stateful": True, "note": None, "problems": [],
    "operators": [
        {"operator_id": 0, "name": "stateStoreSave", "metadata_version": 1, "first_version": 4, "last_version": 9,
         "batch_range": [3, 8], "problems": [],
         "stores": [{"name": "default", "partitions": 2, "problem": None, "column_families": [
             {"name": "default", "key_schema": "(user_id string)", "value_schema": "(count bigint)"}]}]},
        {"operator_id": 1, "name": None, "metadata_version": None, "first_version": 9, "last_version": 9,
         "batch_range": [8, 8], "problems": ["unknown operator metadata version 'v7'"],
         "stores": [{"name": "default", "partitions": None, "problem": "no schema file", "column_families": []}]},
        {"operator_id": 2, "name": "transformWithStateInPySparkExec", "metadata_version": 2, "first_version": 1,
         "last_version": 3, "batch_range": [0, 2], "problems": [],
         "stores": [{"name": "default", "partitions": 3, "problem": None, "column_families": [
             {"name": "$rowCounter_seen", "key_schema": "(user_id string)", "value_schema": "(count bigint)"},
             {"name": "count", "key_schema": "(user_id string)", "value_schema": "(n bigint)"}]}]},
    ],
}


def test_the_state_table_shows_operators_stores_versions_and_schemas() -> None:
    html = state_section(STATE)
    for seen in ("0 stateStoreSave", "(user_id string)", "(count bigint)", "4..9", "1 (name unknown)",
                 "operator 1: unknown operator metadata version &#x27;v7&#x27;",
                 "operator 1: store default: no schema file", "2 transformWithStateInPySparkExec", "count",
                 "(n bigint)"):
        assert seen in html, seen
    assert "$rowCounter" not in html, "Spark's internal column families are left out"


def test_stateless_and_not_started_checkpoints_say_so() -> None:
    assert "Stateless: no state/ directory" in state_section({"stateful": False, "operators": []})
    note = "generation 2 (restore) has not started yet"
    assert note in state_section({"stateful": False, "operators": [], "note": note})


def test_the_job_section_has_a_state_section_and_the_savepoint_action() -> None:
    view = {"job_home": "/jobs/a b", "errors": {}, "state": STATE, "savepoints": []}
    html = page("Stream jobs", [view])
    assert "<h3>State</h3>" in html and "(user_id string)" in html
    assert 'action="savepoint?home=%2Fjobs%2Fa%20b"' in html and 'method="post"' in html
    assert 'href="../dags/stream_savepoint"' in html and 'target="_top"' in html
    assert savepoint_actions("/jobs/a b") in html


def test_taking_a_savepoint_triggers_the_dag_and_opens_its_run(client) -> None:
    response = client.post("/savepoint", params={"home": "/jobs/orders"}, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "../dags/stream_savepoint/runs/manual__2026-11-22T10%3A15%3A00%2B00%3A00"
    assert client.triggered == [("stream_savepoint", {"job_home": "/jobs/orders"}, "alice")]


def test_an_unknown_job_home_or_another_site_is_refused(client) -> None:
    assert client.post("/savepoint", params={"home": "/etc"}, follow_redirects=False).status_code == 404
    refused = client.post("/savepoint", params={"home": "/jobs/orders"}, headers={"origin": "https://evil.example"},
                          follow_redirects=False)
    assert refused.status_code == 403
    assert client.triggered == []


@pytest.mark.parametrize("path", ["/", "/api/job"])
def test_an_unknown_job_home_is_no_such_job_and_names_no_other_home(client, path) -> None:
    response = client.get(path, params={"home": "/etc"})
    assert response.status_code == 404
    assert response.json() == {"detail": "no such job"}
    assert "/jobs/orders" not in response.text, "the known job homes are not listed to whoever asks"


def test_the_route_asks_airflow_whether_the_user_may_run_the_savepoint_dag() -> None:
    from airflow_kafka_stream.plugins import job_page

    route = next(r for r in job_page.create_app().routes if getattr(r, "path", None) == "/savepoint")
    closures = [d.call.__closure__ or () for d in route.dependant.dependencies if d.call is not None]
    captured = {cell.cell_contents for cells in closures for cell in cells if isinstance(cell.cell_contents, str)}
    assert {"POST", "stream_savepoint"} <= captured, captured


def test_the_example_dag_file_exists() -> None:
    assert (Path(__file__).parents[3] / "dags" / "stream_savepoint.py").exists()
