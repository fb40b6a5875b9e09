"""The job page's actions: the params each form becomes (as the example DAG's own Params accept them), the routes
(Airflow's checks stubbed; the full stack checks them for real), and what the page shows of them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.plugins.actions_html import operate_section, reset_confirmation
from airflow_kafka_stream.plugins.job_actions import ACTIONS, CONFIRM, ResetChoice, run_outcome

HOME = "/jobs/orders"
DAGS = Path(__file__).resolve().parents[3] / "dags"
FORMS = {
    "stop": {"savepoint": "on"},
    "upgrade": {"new_version": "3", "application": "", "mode": "cold", "check_only": "on"},
    "reset": {"strategy": "to-datetime", "value": "2026-01-01T00:00:00Z", "topics": "orders", "confirm": CONFIRM},
    "restore": {"savepoint_id": "sp-1", "start": "on"},
    "resume": {},
    "savepoint": {},
}


def dag_of(dag_id: str):
    path = DAGS / f"{dag_id}.py"
    spec = importlib.util.spec_from_file_location(f"example_dag_{dag_id}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_each_form_becomes_params_its_example_dag_accepts(name: str) -> None:
    action = ACTIONS[name]
    conf = action.build(HOME, FORMS[name])
    assert conf["job_home"] == HOME
    from airflow.serialization.serialized_objects import DagSerialization

    # As the api-server holds the DAG (serialized), and as trigger_dag checks a run's conf before the run exists.
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag_of(action.dag_id)))
    params = serialized.params.deep_merge(conf)
    params.validate()
    assert set(conf) <= set(params.keys()), f"{name} sends params {action.dag_id} does not have"


def test_the_forms_say_what_they_mean() -> None:
    assert ACTIONS["stop"].build(HOME, {})["savepoint"] is False  # an unticked checkbox is absent
    upgrade = ACTIONS["upgrade"].build(HOME, FORMS["upgrade"])
    assert (upgrade["standby"], upgrade["check_only"], upgrade["application"]) == (False, True, None)
    reset = ACTIONS["reset"].build(HOME, FORMS["reset"])
    assert (reset["datetime"], reset["value"], reset["topics"], reset["execute"]) == (
        "2026-01-01T00:00:00Z", None, ["orders"], True)
    shifted = ResetChoice.of({"strategy": "shift-by", "value": "-5"}).conf(HOME, execute=False)
    assert (shifted["value"], shifted["datetime"], shifted["execute"]) == ("-5", None, False)


@pytest.mark.parametrize(("name", "form", "field"), [
    ("upgrade", {"new_version": " "}, "new_version"),
    ("upgrade", {"new_version": "3", "mode": "hot"}, "mode"),
    ("reset", {"strategy": "to-datetime", "value": "2026-01-01T00:00:00Z"}, "confirm"),
    ("reset", {"strategy": "to-nowhere", "confirm": CONFIRM}, "strategy"),
    ("reset", {"strategy": "to-datetime", "confirm": CONFIRM}, "value"),
    ("reset", {"strategy": "to-earliest", "value": "5", "confirm": CONFIRM}, "value"),
    ("restore", {}, "savepoint_id"),
])
def test_bad_forms_are_refused_naming_the_field(name: str, form: dict, field: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        ACTIONS[name].build(HOME, form)
    assert refused.value.field == field, refused.value


def test_a_confirmation_resends_exactly_the_planned_choice() -> None:
    choice = ResetChoice.of({"strategy": "to-offset", "value": "orders:0=5", "topics": "orders", "drop_state": "on"})
    assert ResetChoice.of(choice.fields()) == choice


def test_a_runs_outcome_is_what_its_operations_recorded(tmp_path, monkeypatch) -> None:
    from airflow_kafka_stream.plugins.job_view import history
    from airflow_kafka_stream.storage.jobhome import JobHome

    home = JobHome(str(tmp_path / "job"))
    for run_id, operation, result in (("manual__1", "stop-request", "ok"), ("manual__1", "stop", "ok"),
                                      ("manual__2", "reset", "refused"), (None, "submit", "ok")):
        record = {"operation": operation, "result": result, "started_at": "2026-12-04T10:00:00+00:00"}
        home.append_history({**record, **({"airflow": {"run_id": run_id}} if run_id else {}),
                             **({"error": "the job runs; stop it first"} if result == "refused" else {})})
    rows = history(home)  # as the page reads it: newest first
    assert run_outcome(rows, "manual__1") == [{"operation": "stop-request", "result": "ok", "error": None},
                                              {"operation": "stop", "result": "ok", "error": None}]
    assert run_outcome(rows, "manual__2") == [
        {"operation": "reset", "result": "refused", "error": "the job runs; stop it first"}]
    assert run_outcome(rows, "manual__3") == []


def test_a_run_refused_because_the_lock_is_held_shows_the_refusal_as_the_operation_states_it(tmp_path,
                                                                                            monkeypatch) -> None:
    from airflow_kafka_stream.errors import JobStateError
    from airflow_kafka_stream.plugins.job_view import history
    from airflow_kafka_stream.storage.jobhome import JobHome
    from airflow_kafka_stream.storage.operation import recorded_operation

    home = JobHome(str(tmp_path / "job"))
    home.write_spec({"job": "orders", "version": "1"})
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "manual__9")
    with home.lock("reset", "ops@example"):
        with pytest.raises(JobStateError, match="locked by ops@example"):
            with recorded_operation(home, "stop-request", {}):
                raise AssertionError("the body must not run without the lock")
    [said] = run_outcome(history(home), "manual__9")
    assert (said["operation"], said["result"]) == ("stop-request", "refused")
    assert "locked by ops@example for reset" in said["error"] and "unlock" in said["error"]


def test_an_operation_run_by_an_airflow_task_records_which(tmp_path, monkeypatch) -> None:
    from airflow_kafka_stream.storage.jobhome import JobHome
    from airflow_kafka_stream.storage.operation import recorded_operation

    home = JobHome(str(tmp_path / "job"))
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "stream_stop")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "manual__1")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "stop")
    with recorded_operation(home, "probe", {}, existing_home=False):
        pass
    monkeypatch.delenv("AIRFLOW_CTX_DAG_RUN_ID")
    with recorded_operation(home, "probe", {}, existing_home=False):
        pass
    first, second = home.history()[-2:]
    assert first["airflow"] == {"dag_id": "stream_stop", "run_id": "manual__1", "task_id": "stop"}
    assert "airflow" not in second


def test_a_user_who_may_trigger_nothing_sees_no_action() -> None:
    assert operate_section(HOME, [], "RUNNING", [{"id": "sp-1"}], []) == ""
    every = operate_section(HOME, list(ACTIONS), "GAVE_UP", [{"id": "sp-1", "batch_id": 4, "app_version": "2"}], [])
    for route in ("stop", "upgrade", "reset-plan", "restore", "resume"):
        assert f'action="{route}?home=%2Fjobs%2Forders"' in every, route
    running = operate_section(HOME, list(ACTIONS), "RUNNING", [], [])
    assert "resume?" not in running and "restore?" not in running  # nothing to restore, nothing to start again


def test_a_job_recovery_gave_up_on_is_acknowledged_by_stopping_it_or_started_again() -> None:
    gave_up = operate_section(HOME, list(ACTIONS), "GAVE_UP", [], [])
    assert "Acknowledge: keep it stopped" in gave_up and 'action="stop?home=%2Fjobs%2Forders"' in gave_up
    assert 'name="savepoint">' in gave_up, "a dead job's savepoint is asked for, not assumed"
    assert 'action="resume?home=%2Fjobs%2Forders"' in gave_up
    assert "Acknowledge" not in operate_section(HOME, list(ACTIONS), "RUNNING", [], [])


def test_the_runs_show_state_link_and_what_the_operation_said() -> None:
    runs = [{"dag_id": "stream_offset_reset", "run_id": "manual__2", "state": "failed", "by": "alice",
             "outcome": [{"operation": "reset", "result": "refused", "error": "the job runs; stop it first"}]}]
    shown = operate_section(HOME, [], "RUNNING", [], runs)
    assert 'href="../dags/stream_offset_reset/runs/manual__2" target="_top"' in shown
    assert "reset: refused (the job runs; stop it first)" in shown and "failed" in shown


def test_the_reset_confirmation_names_each_change_and_warns_when_the_job_runs() -> None:
    choice = ResetChoice.of({"strategy": "to-earliest"})
    plan = {"partitions": [
        {"topic": "orders", "partition": 0, "in_scope": True, "checkpoint_offset": 40, "target": 0},
        {"topic": "orders", "partition": 1, "in_scope": True, "checkpoint_offset": 0, "target": 0},
    ]}
    shown = reset_confirmation(HOME, choice, plan, "TOPIC PARTITION ...", "RUNNING")
    assert "orders:0 from 40 to 0" in shown and "orders:1" not in shown
    assert "1 partition(s) change" in shown and f'value="{CONFIRM}"' in shown
    assert "refused while it runs" in shown
    unchanged = reset_confirmation(HOME, choice, {"partitions": plan["partitions"][1:]}, "", "STOPPED")
    assert "Nothing would change" in unchanged and "<button" not in unchanged


@pytest.mark.parametrize("name", ["stop", "upgrade", "reset", "restore", "resume"])
def test_an_action_triggers_its_dag_with_the_forms_params_and_comes_back_to_the_job(client, name) -> None:
    response = client.post(f"/{name}", params={"home": HOME}, data=FORMS[name], follow_redirects=False)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "./?home=%2Fjobs%2Forders"
    assert client.triggered == [(ACTIONS[name].dag_id, ACTIONS[name].build(HOME, FORMS[name]), "alice")]


def test_a_bad_form_is_400_naming_the_field_and_triggers_nothing(client) -> None:
    response = client.post("/upgrade", params={"home": HOME}, data={"new_version": ""}, follow_redirects=False)
    assert response.status_code == 400 and "new_version" in response.json()["detail"]
    refused = client.post("/reset", params={"home": HOME}, data={"strategy": "to-earliest"})
    assert refused.status_code == 400 and "plan it first" in refused.json()["detail"]
    assert client.post("/stop", params={"home": "/etc"}, data={}).status_code == 404
    other_site = client.post("/stop", params={"home": HOME}, data={}, headers={"origin": "https://evil.example"})
    assert other_site.status_code == 403
    assert client.triggered == []


@pytest.mark.parametrize("name", ["stop", "upgrade", "reset", "restore", "resume"])
def test_each_action_route_asks_airflow_whether_the_user_may_trigger_its_dag(name) -> None:
    from airflow_kafka_stream.plugins import job_page

    paths = {"reset": ("/reset", "/reset-plan")}.get(name, (f"/{name}",))
    for path in paths:
        route = next(r for r in job_page.create_app().routes if getattr(r, "path", None) == path)
        closures = [d.call.__closure__ or () for d in route.dependant.dependencies if d.call is not None]
        captured = {cell.cell_contents for cells in closures for cell in cells
                    if isinstance(cell.cell_contents, str)}
        assert {"POST", ACTIONS[name].dag_id} <= captured, (path, captured)
