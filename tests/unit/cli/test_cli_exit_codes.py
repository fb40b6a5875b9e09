"""Exit codes tell a scheduler what happened: 2 refused with nothing changed, 1 changed but unfinished."""

from __future__ import annotations

import pytest

from airflow_kafka_stream import cli
from airflow_kafka_stream.cli import inspection
from airflow_kafka_stream.errors import InvalidInputError, JobStateError, KafkaAccessError, OperationIncompleteError


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(InvalidInputError("bad offset -3"), 2, id="1-bad-input-is-refused"),
        pytest.param(JobStateError("job is running"), 2, id="2-wrong-job-state-is-refused"),
        pytest.param(KafkaAccessError("broker unreachable"), 2, id="3-unreachable-broker-is-refused"),
        pytest.param(OperationIncompleteError("checkpoint moved, group did not"), 1,
                     id="4-a-half-done-operation-is-not-a-refusal"),
    ],
)
def test_errors_map_to_exit_codes(monkeypatch, capsys, error, code):
    def handler(_args):
        raise error

    monkeypatch.setattr(inspection, "_cmd_history", handler)
    assert cli.main(["history", "--job-home", "/nowhere"]) == code
    assert capsys.readouterr().err.strip() == f"error: {error}"


@pytest.fixture
def submits(monkeypatch):
    """The submit command's handler replaced by one that records the application arguments it would launch."""
    from airflow_kafka_stream.cli import lifecycle

    launched: list[list[str]] = []
    monkeypatch.setattr(lifecycle, "_cmd_submit", lambda args: launched.append(list(args.application_args)) or 0)
    return launched


SUBMIT = ["submit", "--job-home", "/nowhere", "--app-version", "1", "--application", "/code/job.py"]


@pytest.mark.parametrize(("extra", "refused"), [
    pytest.param(["--frobnicate", "3"], "--frobnicate 3", id="1-an-unknown-option-and-its-value"),
    pytest.param(["--frobnicate=3"], "--frobnicate=3", id="2-an-unknown-option-with-equals"),
    pytest.param(["3"], "3", id="3-a-stray-word-is-no-application-argument"),
    pytest.param(["--frobnicate", "3", "--", "--mine"], "--frobnicate 3", id="4-even-with-application-arguments"),
])
def test_an_unknown_option_or_a_word_before_the_double_dash_ends_parsing(submits, capsys, extra, refused):
    with pytest.raises(SystemExit) as ended:
        cli.main([*SUBMIT, *extra])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {refused} (arguments of --application go after --)" in err, err
    assert submits == [], "nothing is launched"


def test_application_arguments_are_what_follows_the_double_dash(submits):
    assert cli.main([*SUBMIT, "--", "--topic", "orders", "3"]) == 0
    assert cli.main(SUBMIT) == 0
    assert submits == [["--topic", "orders", "3"], []]


def test_a_command_without_application_arguments_refuses_a_double_dash(capsys):
    with pytest.raises(SystemExit) as ended:
        cli.main(["history", "--job-home", "/nowhere", "--", "x"])
    assert ended.value.code == 2 and "unrecognized arguments: -- x" in capsys.readouterr().err


#: What a failed standby's log ends with: its traceback and Spark's INFO lines, sixty lines of them.
LOG_TAIL = "\n".join(["Traceback (most recent call last):", *(f'  File "job.py", line {n}, in run' for n in range(29)),
                      *(f"26/11/28 22:38:{n:02d} INFO SparkContext: Successfully stopped" for n in range(30))])


def test_a_failure_prints_its_reason_and_where_the_log_is_and_the_log_only_when_verbose(monkeypatch, capsys):
    error = JobStateError("upgrade of /jobs/orders to version 2 failed before any downtime: the rehearsal says "
                          "needs drop_state", log="/jobs/orders/logs/standby-driver-1.log", log_tail=LOG_TAIL)

    def handler(_args):
        raise error

    monkeypatch.setattr(inspection, "_cmd_history", handler)
    assert cli.main(["history", "--job-home", "/nowhere"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {error.reason}",
        "the full log: /jobs/orders/logs/standby-driver-1.log (airflow-kafka-stream --verbose ... prints its end here)"]
    assert cli.main(["--verbose", "history", "--job-home", "/nowhere"]) == 2
    assert LOG_TAIL in capsys.readouterr().err
    assert str(error).endswith(LOG_TAIL), "a task log (str of the error) still ends with the log's end"
