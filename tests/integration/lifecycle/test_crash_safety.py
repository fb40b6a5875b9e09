"""SIGKILL a reset, a savepoint and a restore at every durable step: the job is never left broken.

After each kill the next operation (which finishes or undoes the interrupted
one, and breaks the dead process's lock) leaves a checkpoint that fsck accepts,
that is either the old one or the new one, and that real Spark resumes from.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cli_helpers import Job, cli, consume, make_job
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def crashing_cli(step: int, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CRASH_AT_STEP=str(step), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(Path(__file__).parents[1] / "crash_cli.py"), *argv],
                          env=env, capture_output=True, text=True, timeout=120)


def steps_of(*argv: str) -> int:
    done = crashing_cli(0, *argv)
    assert done.returncode == 0, done.stderr
    return int(done.stderr.rsplit("STEPS=", 1)[1].split()[0])


@pytest.fixture(scope="module")
def base(spark, kafka_bootstrap, tmp_path_factory) -> Job:
    topic = create_topic(kafka_bootstrap, unique("crash"), 2)
    for partition in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"r{i}") for i in range(12)], partition=partition)
    home = tmp_path_factory.mktemp("crash") / "home"
    return make_job(spark, kafka_bootstrap, home, {topic: 2})


def check_recovers_to_old_or_new(capsys, spark, job: Job, old: dict, new: dict) -> str:
    """Repair (as the next operation would), then fsck, compare, and let Spark resume."""
    assert cli(capsys, "checkpoint", "repair", "--job-home", str(job.home)).code == 0
    fsck = cli(capsys, "checkpoint", "fsck", "--job-home", str(job.home))
    assert fsck.code == 0, fsck.out
    position = job.position()
    assert position in (old, new), position
    rows = consume(spark, job)
    firsts = {}
    for topic, partition, offset in rows:
        firsts[(topic, partition)] = min(offset, firsts.get((topic, partition), offset))
    for tp, offset in position.items():
        assert firsts.get((tp.topic, tp.partition), offset) == offset, "Spark resumed elsewhere"
    return "old" if position == old else "new"


def test_reset_killed_at_every_step(capsys, spark, base, tmp_path):
    args = ("reset", "--to-offset", "3", "--execute")
    total = steps_of(*args, "--job-home", str(base.copy(tmp_path / "probe").home))
    assert total >= 3, "a reset writes a journal, offsets, a commit and removes the journal"
    outcomes = []
    for step in range(1, total + 1):
        job = base.copy(tmp_path / f"step{step}")
        old = job.position()
        killed = crashing_cli(step, *args, "--job-home", str(job.home))
        assert killed.returncode == -9, killed.stderr
        new = {tp: 3 for tp in old}
        outcomes.append(check_recovers_to_old_or_new(capsys, spark, job, old, new))
    assert "old" in outcomes and "new" in outcomes, outcomes


def test_savepoint_killed_at_every_step_leaves_no_visible_savepoint(capsys, spark, base, tmp_path):
    args = ("savepoint", "create")
    total = steps_of(*args, "--job-home", str(base.copy(tmp_path / "probe").home))
    assert total >= 3, f"a savepoint copies metadata, offsets, commits and its manifest, got {total} steps"
    for step in range(1, total + 1):
        job = base.copy(tmp_path / f"step{step}")
        killed = crashing_cli(step, *args, "--job-home", str(job.home))
        assert killed.returncode == -9, killed.stderr
        listed = cli(capsys, "savepoint", "list", "--job-home", str(job.home), "--json")
        assert listed.code == 0 and listed.json() == [], "an interrupted savepoint must stay invisible"
        # The dead process's lock is broken by the next operation, which then succeeds.
        again = cli(capsys, "savepoint", "create", "--job-home", str(job.home), "--json")
        assert again.code == 0, again.err
        assert cli(capsys, "savepoint", "validate", again.json()["id"], "--job-home", str(job.home)).code == 0
        pruned = cli(capsys, "savepoint", "prune", "--keep-last", "1", "--job-home", str(job.home), "--json")
        assert pruned.code == 0
        position = job.position()
        check_recovers_to_old_or_new(capsys, spark, job, position, position)


def test_restore_killed_at_every_step_keeps_a_startable_generation(capsys, spark, base, tmp_path):
    seed = base.copy(tmp_path / "seed")
    created = cli(capsys, "savepoint", "create", "--job-home", str(seed.home), "--json")
    assert created.code == 0, created.err
    savepoint = created.json()["id"]
    args = ("restore", "--savepoint", savepoint)
    total = steps_of(*args, "--job-home", str(seed.copy(tmp_path / "probe").home))
    assert total >= 5, f"a restore copies several files and records the generation, got {total} steps"
    for step in range(1, total + 1):
        job = seed.copy(tmp_path / f"step{step}")
        generation = job.jobhome.current_generation()
        killed = crashing_cli(step, *args, "--job-home", str(job.home))
        assert killed.returncode == -9, killed.stderr
        assert job.jobhome.current_generation() == generation, "a half-restored generation must not be current"
        done = cli(capsys, "restore", "--savepoint", savepoint, "--job-home", str(job.home), "--json")
        assert done.code == 0, done.err
        assert job.jobhome.current_generation() > generation
        position = job.position()
        check_recovers_to_old_or_new(capsys, spark, job, position, position)
