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
