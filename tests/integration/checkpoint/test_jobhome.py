"""The job home works the same on a local path and on S3 (a real local S3 server)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from airflow_kafka_stream.errors import InvalidInputError, JobStateError
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation

pytestmark = pytest.mark.integration


@pytest.fixture(params=["local", "s3"])
def home(request, tmp_path):
    if request.param == "local":
        return JobHome(str(tmp_path / "job"))
    s3 = request.getfixturevalue("s3_server")
    return JobHome(f"s3://{s3['bucket']}/{uuid.uuid4().hex}/job", s3["storage_options"])


def test_lock_is_exclusive_and_names_the_holder(home):
    with home.lock("reset", holder="alice@host:1"):
        with pytest.raises(JobStateError) as err:
            with home.lock("restore", holder="bob@host:2"):
                pass
        assert "alice@host:1" in str(err.value) and "reset" in str(err.value)
        assert "unlock" in str(err.value)
    with home.lock("restore", holder="bob@host:2"):
        pass


def test_only_one_of_many_concurrent_lockers_wins(home):
    wins, refusals = [], []
    barrier = threading.Barrier(6)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            with home.lock("op", holder=f"w{i}"):
                wins.append(i)
                barrier_done.wait()
        except JobStateError:
            refusals.append(i)

    barrier_done = threading.Event()
    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    # Let everyone try while the winner holds the lock.
    for _ in range(200):
        if len(wins) + len(refusals) == 6 or (wins and len(refusals) == 5):
            break
        threading.Event().wait(0.05)
    barrier_done.set()
    for t in threads:
        t.join(30)
    assert len(wins) == 1 and len(refusals) == 5


def test_generations_history_and_stop_requests(home):
    assert home.generations() == []
    gen, url = home.new_generation("submit")
    gen2, url2 = home.new_generation("restore", start_offsets={"t": {"0": 5}}, from_savepoint="sp1")
    assert (gen, gen2) == (1, 2)
    assert home.checkpoint_url() == url2 and url2.endswith("checkpoints/0002")
    assert home.generation_info(2)["start_offsets"] == {"t": {"0": 5}}
    home.append_history({"operation": "a"})
    home.append_history({"operation": "b"})
    assert [r["operation"] for r in home.history()] == ["a", "b"]
    assert not home.stop_requested()
    home.request_stop("me")
    assert home.stop_requested()
    home.clear_stop_request()
    assert not home.stop_requested()


def test_recorded_operation_writes_history_and_redacts_secrets(home):
    home.write_spec({"job": "history-test"})  # an existing job home: operations refuse any other directory
    with recorded_operation(home, "reset", {"sasl.password": "hunter2", "to": 5}, by="tester") as rec:
        rec["before"], rec["after"] = {"x": 1}, {"x": 2}
    with pytest.raises(InvalidInputError):
        with recorded_operation(home, "reset", {"to": -3}, by="tester"):
            raise InvalidInputError("bad offset -3")
    first, second = home.history()
    assert first["result"] == "ok" and first["args"]["sasl.password"] == "***"
    assert second["result"] == "refused" and "bad offset" in second["error"]
    assert "hunter2" not in str(home.history())
    assert home.read_lock() is None, "the lock is released after the operation"


def test_require_refuses_a_directory_that_is_not_a_job_home(tmp_path):
    with pytest.raises(InvalidInputError, match="not a job home"):
        JobHome(str(tmp_path)).require()


HOLD_LOCK = """
import sys, time, pathlib
from airflow_kafka_stream.storage.jobhome import JobHome
home, marks = sys.argv[1], pathlib.Path(sys.argv[2])
with JobHome(home).lock("reset", holder="old-holder"):
    (marks / "held").write_text("yes")
    deadline = time.monotonic() + 60
    while not (marks / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""


def test_a_broken_lock_holder_leaves_the_next_holders_lock_alone(tmp_path):
    """unlock breaks a lock whose holder still runs; when that holder finishes, the new holder's lock stays."""
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    home = JobHome(str(tmp_path / "job"))
    marks = tmp_path / "marks"
    marks.mkdir()
    old = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, home.url, str(marks)], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (marks / "held").exists():
            assert old.poll() is None and time.monotonic() < deadline, old.stdout.read() if old.stdout else ""
            time.sleep(0.05)
        assert home.force_unlock()["holder"] == "old-holder"
        with home.lock("restore", holder="new-holder"):
            (marks / "go").write_text("finish")
            output, _ = old.communicate(timeout=60)
            assert old.returncode == 0, output
            held = home.read_lock()
            assert held is not None and held["holder"] == "new-holder", f"the old holder removed it: {output}"
            with pytest.raises(JobStateError, match="new-holder"):
                with home.lock("reset", holder="third"):
                    pass
        assert home.read_lock() is None, "the new holder releases its own lock"
    finally:
        if old.poll() is None:
            old.kill()
            old.wait(10)


def test_a_lock_is_released_only_while_it_holds_our_token(home):
    with home.lock("reset", holder="first") as info:
        assert home.read_lock()["token"] == info["token"]
        home.force_unlock()
        home.fs.pipe_file(home.p("lock"), b'{"holder": "second", "operation": "restore", "token": "t2"}')
    assert home.read_lock()["holder"] == "second"


def test_an_operation_on_a_directory_that_is_not_a_job_home_is_refused_and_leaves_nothing(home):
    """A mistyped job home: refused before the lock or the history could create anything there."""
    with pytest.raises(InvalidInputError, match="is not a job home") as info:
        with recorded_operation(home, "reset", {"to": 5}, by="tester"):
            raise AssertionError("the body must not run")
    assert info.value.setting == "job_home"
    assert home.read_lock() is None and home.history() == []
    assert not home.fs.exists(home.p("job.json")) and not home.fs.exists(home.p("history.jsonl"))


def test_unlock_leaves_a_tombstone_the_broken_holder_obeys(home):
    """After unlock, the old holder removes no lock, even one that reads as its own (a stale cached or replica
    read, a restored backup), and clears its tombstone."""
    with home.lock("reset", holder="first") as info:
        assert home.force_unlock()["holder"] == "first"
        assert home.fs.exists(home.p("control", "broken-locks", info["token"]))
        with home.lock("restore", holder="second"):
            pass  # "first" still runs; "second" came and went
        home.fs.pipe_file(home.p("lock"), json.dumps(info).encode())  # what a stale read would show "first"
    assert home.read_lock() is not None, "the broken holder removed a lock after unlock"
    assert not home.fs.exists(home.p("control", "broken-locks", info["token"]))


def test_a_stale_lock_from_another_host_is_not_broken_by_a_pid_check(home):
    """A pid means nothing on another host: the lock stays until a person runs unlock; the refusal says why."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = {"holder": "airflow@worker-7:4242", "operation": "reset", "acquired_at": "2020-01-01T00:00:00+00:00",
             "host": "worker-7", "pid": int(dead.stdout), "token": "t-worker-7"}
    home.fs.makedirs(home.path, exist_ok=True)
    home.fs.pipe_file(home.p("lock"), json.dumps(stale).encode())
    with pytest.raises(JobStateError, match="from host worker-7, whose processes cannot be checked from here.*unlock"):
        with home.lock("restore", holder="here"):
            pass
    assert home.read_lock()["token"] == "t-worker-7"
    stale["host"] = __import__("socket").gethostname()  # the same pid on this host: provably gone, broken
    home.fs.pipe_file(home.p("lock"), json.dumps(stale).encode())
    with home.lock("restore", holder="here"):
        assert home.read_lock()["holder"] == "here"


def test_concurrent_appends_lose_no_record_and_the_lock_holder_folds_them(home):
    """Writers that hold no lock (a watchdog restart, a standby ended) append while others do: on S3 a rewrite
    of the whole file would drop whatever another writer added in between."""
    from airflow_kafka_stream.storage import history

    home.write_spec({"job": "history-race"})

    def writer(name: str) -> None:
        for i in range(6):
            home.append_history({"operation": f"{name}-{i}"})

    threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    written = {f"w{n}-{i}" for n in range(4) for i in range(6)}
    assert sorted(r["operation"] for r in home.history()) == sorted(written)
    # Each writer's records stay in the order it wrote them.
    for n in range(4):
        mine = [r["operation"] for r in home.history() if r["operation"].startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(6)]

    with recorded_operation(home, "savepoint-prune", {}, by="tester"):
        pass  # a locked operation: its record is added, then the records are folded on object stores
    after = home.history()
    assert [r["operation"] for r in after][-1] == "savepoint-prune" and len(after) == len(written) + 1
    assert len({r["id"] for r in after}) == len(after), "every record has its own id"
    leftover = home.fs.ls(home.p(history.RECORDS_DIR), detail=False) if home.fs.exists(home.p(history.RECORDS_DIR)) \
        else []
    if home.url.startswith("s3://"):
        assert leftover == [], "25 records are over the fold threshold: all folded into history.jsonl"
    else:
        assert leftover == [] and home.fs.exists(home.p(history.HISTORY_FILE)), "local homes append to the file"


def test_a_record_seen_both_folded_and_as_its_object_is_read_once(s3_server):
    """A fold writes history.jsonl before it deletes the objects it folded: a reader in between meets both
    (object stores only: a local home appends to the file and has no record objects)."""
    from airflow_kafka_stream.storage import history

    home = JobHome(f"s3://{s3_server['bucket']}/{uuid.uuid4().hex}/job", s3_server["storage_options"])
    home.append_history({"operation": "a"})
    home.append_history({"operation": "b"})
    objects = home.fs.ls(home.p(history.RECORDS_DIR), detail=False)
    folded = b"".join(home.fs.cat_file(p) for p in sorted(objects))
    home.fs.pipe_file(home.p(history.HISTORY_FILE), folded)  # the fold's write, before its deletes
    assert [r["operation"] for r in home.history()] == ["a", "b"]
