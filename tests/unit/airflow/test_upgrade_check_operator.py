"""StreamUpgradeCheckOperator in its own words: the verdict to XCom, and a failure that names what to change.

The check itself (``ops.upgrade_check.check_upgrade``) runs real drivers; here it is replaced by its answers,
so each verdict's task outcome is shown without a JVM. Through Airflow, with real drivers:
``tests/integration/airflow/test_airflow_upgrade_check.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.operators.upgrade_check import StreamUpgradeCheckOperator, UpgradeCheckFailed
from airflow_kafka_stream.ops import upgrade_check
from airflow_kafka_stream.ops.upgrade_check import UpgradeCheck

REASONS = {
    "compatible": "the new query loaded the job's state and ran 2 batches",
    "needs drop_state": "expects key schema (_groupingexpression bigint) but the state holds "
                        "(_groupingexpression string)",
    "fails": "sink (format 'nosuchformat') cannot be opened",
    "timed out": "the rehearsal outlived its time limit",
    "not rehearsed": "the job has no committed batch",
}


class _Ti:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def _run(monkeypatch, verdict: str, **kwargs: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Run the operator's execute with ``check_upgrade`` answering ``verdict``; (result or error, XCom, options)."""
    seen: dict[str, Any] = {}

    def check(home, submission, launcher, options, **_: Any) -> UpgradeCheck:
        seen.update(submission=submission, options=options)
        return UpgradeCheck(submission, verdict, REASONS[verdict], drop_state=options.drop_state)

    monkeypatch.setattr(upgrade_check, "check_upgrade", check)
    task = StreamUpgradeCheckOperator(task_id="check", job_home="/jobs/orders", app_version="2",
                                      application="/code/v2.py", **kwargs)
    monkeypatch.setattr(task, "_launch_plan", lambda: ("home", "2", "launcher"))
    monkeypatch.setattr(task, "_secrets", lambda: [])
    ti = _Ti()
    try:
        outcome: Any = task.execute({"ti": ti})
    except UpgradeCheckFailed as exc:
        outcome = exc
    return outcome, ti.pushed, seen


@pytest.mark.parametrize(("verdict", "drop_state"), [("compatible", False), ("not rehearsed", False),
                                                      ("needs drop_state", True), ("compatible", "true")])
def test_an_upgrade_that_would_go_on_succeeds_with_the_verdict_in_xcom(monkeypatch, verdict, drop_state):
    outcome, pushed, seen = _run(monkeypatch, verdict, drop_state=drop_state)
    assert outcome == pushed["return_value"]
    assert (outcome["verdict"], outcome["would_upgrade"]) == (verdict, True)
    assert seen["options"].drop_state is (drop_state in (True, "true"))
    assert seen["options"].rehearsal_request(check=True)["check"] is True


@pytest.mark.parametrize(("verdict", "parameters"), [
    ("needs drop_state", "StreamUpgradeCheckOperator parameter: drop_state]"),
    ("fails", "StreamUpgradeCheckOperator parameters: application, application_args]"),
    ("timed out", "StreamUpgradeCheckOperator parameters: rehearsal_timeout_seconds, ready_timeout_seconds]"),
])
def test_an_upgrade_that_would_not_go_on_fails_naming_the_verdict_reason_and_parameter(monkeypatch, verdict,
                                                                                         parameters):
    outcome, pushed, _ = _run(monkeypatch, verdict)
    assert isinstance(outcome, UpgradeCheckFailed)
    message = str(outcome)
    assert f"would not go on: {verdict}: {REASONS[verdict]}" in message, message
    assert "nothing was changed" in message and message.endswith(parameters), message
    assert (pushed["return_value"]["verdict"], pushed["return_value"]["would_upgrade"]) == (verdict, False)


def test_fail_on_incompatible_off_succeeds_with_the_verdict(monkeypatch):
    outcome, pushed, _ = _run(monkeypatch, "needs drop_state", fail_on_incompatible="False")
    assert outcome == pushed["return_value"] and outcome["would_upgrade"] is False


def test_disabled_it_skips_without_checking(monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    with pytest.raises(AirflowSkipException):
        _run(monkeypatch, "compatible", enabled="False")


@pytest.mark.parametrize("name", ["ready_timeout_seconds", "rehearsal_timeout_seconds"])
def test_a_timeout_that_is_not_positive_is_refused_when_the_dag_is_parsed(name):
    with pytest.raises(InvalidInputError, match=name):
        StreamUpgradeCheckOperator(task_id="check", job_home="/jobs/orders", app_version="2", **{name: 0})


def test_its_switches_are_templated_for_the_dags_params():
    task = StreamUpgradeCheckOperator(task_id="check", job_home="/j", app_version="2", enabled="{{ params.check_only }}",
                                      drop_state="{{ params.drop_state }}")
    assert {"enabled", "drop_state", "fail_on_incompatible", "application", "application_args"} <= set(
        task.template_fields)
