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
