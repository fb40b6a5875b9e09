"""Rolling back to a savepoint must not let a file sink silently skip batches it logged after the savepoint."""

from __future__ import annotations

import pytest

from tests.integration.cli_helpers import cli, make_job
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def saved(spark, kafka_bootstrap, tmp_path_factory):
    topic = create_topic(kafka_bootstrap, unique("sinkguard"), 1)
    produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(5)], partition=0)
    return make_job(spark, kafka_bootstrap, tmp_path_factory.mktemp("sinkguard") / "home", {topic: 1})


def sink_log(path, batches: int):
    log = path / "_spark_metadata"
    log.mkdir(parents=True)
    for batch in range(batches):
        (log / str(batch)).write_text("v1\n")
    return path


@pytest.mark.parametrize(
    ("logged_after", "allow", "code"),
    [
        pytest.param(3, False, 2, id="1-sink-ran-ahead-of-the-savepoint-refused"),
        pytest.param(3, True, 0, id="2-the-user-may-accept-it"),
        pytest.param(0, False, 0, id="3-sink-not-ahead-restores"),
    ],
)
def test_restore_with_state_checks_the_sink_log(capsys, saved, tmp_path, logged_after, allow, code):
    job = saved.copy(tmp_path / "home")
    created = cli(capsys, "savepoint", "create", "--job-home", str(job.home), "--json")
    assert created.code == 0, created.err
    batch = created.json()["batch_id"]
    sink = sink_log(tmp_path / "sink", batch + 1 + logged_after)
    generation = job.jobhome.current_generation()
    args = ["restore", "--job-home", str(job.home), "--savepoint", created.json()["id"], "--sink-path", str(sink)]
    result = cli(capsys, *args, *(["--allow-sink-batch-log"] if allow else []))
    assert result.code == code, result.err
    if code == 2:
        assert "silently skip batches" in result.err and f"up to {batch + logged_after}" in result.err
        assert job.jobhome.current_generation() == generation, "a refused restore starts no generation"
    else:
        assert job.jobhome.current_generation() == generation + 1
