"""storage.layout names every file of a job home once; JobHome's owner methods read and write them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.storage import layout
from airflow_kafka_stream.storage.jobhome import (
    BROKEN_LOCKS,
    GENERATION_WIDTH,
    STANDBY_GO,
    STANDBY_RECORD,
    STOP_MODE_DRAIN,
    STOP_MODE_KILL,
    JobHome,
    utc_now,
    who_am_i,
)
from airflow_kafka_stream.storage.status import STATUS_FILE

NAMES = [
    # id, name, path relative to the home, why
    ("job-spec", layout.JOB_SPEC, "job.json", "what was submitted"),
    ("status", layout.STATUS, "status.json", "kept fresh by the running driver"),
    ("lock", layout.LOCK, "lock", "the control-plane lock"),
    ("history", layout.HISTORY, "history.jsonl", "the operation records"),
    ("stop", layout.STOP_REQUEST, "control/stop", "a stop request"),
    ("drained", layout.DRAINED, "control/drained.json", "the source's drain answer"),
    ("standby", layout.STANDBY_RECORD, "control/standby.json", "the warm standby's record"),
    ("standby-go", layout.STANDBY_GO, "control/standby-go.json", "the upgrade's go for it"),
    ("launched", layout.LAUNCH_RECORD, "control/launched.json", "the last driver a submit launched"),
    ("watchdog", layout.WATCHDOG_MEMORY, "control/watchdog.json", "the watchdog's memory"),
    ("pins", layout.PINS, "control/pins.json", "savepoints kept from housekeeping"),
    ("broken-lock", layout.broken_lock("abc"), "control/broken-locks/abc", "a lock unlock broke"),
    ("checkpoint", layout.checkpoint(7), "checkpoints/0007", "a generation's checkpoint"),
    ("generation", layout.generation_record(7), "generations/0007.json", "the record making it current"),
    ("generation-start", layout.generation_start(7), "generations/0007.start.json", "its start offsets"),
    ("savepoint", layout.savepoint("sp1"), "savepoints/sp1", "a savepoint"),
    ("submission", layout.submission("2.1"), "submissions/2.1.json", "how a version was submitted"),
    ("log", layout.log_file("driver.log"), "logs/driver.log", "a launched driver's output"),
]


@pytest.mark.parametrize(("case", "name", "path", "why"), NAMES, ids=[c[0] for c in NAMES])
def test_every_file_is_named_once(case, name, path, why):
    assert "/".join(name) == path, why


def test_the_names_jobhome_exported_are_the_layouts():
    assert (STANDBY_RECORD, STANDBY_GO, BROKEN_LOCKS) == (
        layout.STANDBY_RECORD, layout.STANDBY_GO, layout.BROKEN_LOCKS)
    assert GENERATION_WIDTH == 4 and STATUS_FILE == "status.json"
    assert (STOP_MODE_DRAIN, STOP_MODE_KILL) == ("drain", "kill")
    assert utc_now().tzinfo is not None and "@" in who_am_i()


@pytest.mark.parametrize(("case", "name", "ok", "why"), [
    ("plain", "v2", True, "a version or savepoint id"),
    ("dotted-inside", "2.1.0", True, "dots inside are fine"),
    ("empty", "", False, "names nothing"),
    ("slash", "a/b", False, "two segments would leave its directory"),
    ("dot-first", ".hidden", False, "hidden, or .. going up"),
], ids=lambda c: c if isinstance(c, str) and c.islower() and " " not in c else None)
def test_one_path_segment(case, name, ok, why):
    assert layout.is_segment(name) is ok, why


@pytest.fixture
def home(tmp_path) -> JobHome:
    return JobHome(str(tmp_path / "job"))


def _on_disk(home: JobHome, name: tuple[str, ...]):
    return json.loads((home.fs.cat_file(home.p(*name))).decode())


def test_launch_record(home):
    assert home.launch_record() is None
    home.record_launch({"pid": 5, "app_version": "1"})
    assert home.launch_record() == {"pid": 5, "app_version": "1"} == _on_disk(home, layout.LAUNCH_RECORD)


def test_a_broken_control_document_reads_as_none(home):
    home.fs.makedirs(home.p(*layout.CONTROL), exist_ok=True)
    home.fs.pipe_file(home.p(*layout.LAUNCH_RECORD), b"{half")
    home.fs.pipe_file(home.p(*layout.WATCHDOG_MEMORY), b"[1, 2]")
    assert home.launch_record() is None and home.watchdog_memory() is None


def test_submissions(home):
    assert home.submission("2") is None
    home.record_submission("2", {"application": "app.py", "app_version": "2"})
    assert home.submission("2") == {"application": "app.py", "app_version": "2"}
    assert home.submission_path("2") == home.p("submissions", "2.json")
    with pytest.raises(InvalidInputError, match="is invalid"):
        home.record_submission("../x", {})


def test_watchdog_memory_and_pins(home):
    home.write_watchdog_memory({"since": "t", "last_batch_id": 3, "lag": 0})
    assert home.watchdog_memory() == {"since": "t", "last_batch_id": 3, "lag": 0}
    assert home.pins() == {}
    home.write_pins({"sp1": "upgrade to 2"})
    assert home.pins() == {"sp1": "upgrade to 2"} == _on_disk(home, layout.PINS)


def test_standby_files(home):
    home.write_standby_record({"state": "READY", "token": "t"})
    home.write_standby_go({"token": "t", "go": True})
    assert home.standby_record() == home.read_control(STANDBY_RECORD) == {"state": "READY", "token": "t"}
    assert home.standby_go() == {"token": "t", "go": True}


def test_the_go_is_cleared_once_taken(home):
    assert not home.clear_standby_go(), "no go: nothing to clear"
    home.write_standby_go({"token": "t", "action": "go"})
    assert home.clear_standby_go() and home.standby_go() is None
    assert not home.fs.exists(home.p(*STANDBY_GO))


@pytest.mark.parametrize(("written", "expected", "why"), [
    (None, None, "no request"),
    (b'{"by": "me", "mode": "drain"}', {"by": "me", "mode": "drain"}, "a request read whole"),
    (b'{"by": "me", "mo', {}, "half written (no atomic rename): it stands, its fields come at the next look"),
    (b"[1, 2]", {}, "not a JSON object: it exists, so it stands"),
])
def test_the_drivers_read_of_a_stop_request(home, written, expected, why):
    """The driver's supervision must not miss a request being written; other readers see none until it is whole."""
    if written is not None:
        home.fs.makedirs(home.p(*layout.CONTROL), exist_ok=True)
        home.fs.pipe_file(home.p(*layout.STOP_REQUEST), written)
    assert home.stop_request(unreadable_stands=True) == expected, why
    assert home.stop_request() == (expected or None), why


def test_stop_request_and_drain_answer(home):
    assert not home.stop_requested() and home.stop_request() is None and home.drained() is None
    home.request_stop("me", mode=STOP_MODE_KILL)
    assert home.stop_requested() and home.stop_request()["mode"] == "kill"
    home.write_control(layout.DRAINED, {"offsets": {"t": {"0": 3}}})
    assert home.drained() == {"offsets": {"t": {"0": 3}}}
    assert home.clear_drained() and home.drained() is None and not home.clear_drained()
    home.write_control(layout.DRAINED, {"offsets": {}})
    assert home.clear_stop_request() == ["stop", "drained.json"]
    assert not home.stop_requested()


def test_generation_start(home):
    gen, _url = home.new_generation("reset", start_offsets={"t": {"0": 1}})
    assert home.generation_start(gen) is None
    assert home.generation_start_offsets(gen) == {"t": {"0": 1}}, "without a start document: the record's"
    home.write_control(layout.generation_start(gen), {"offsets": {"t": {"0": 4}}})
    assert home.generation_start(gen) == {"offsets": {"t": {"0": 4}}}
    assert home.generation_start_offsets(gen) == {"t": {"0": 4}}, "the start document wins"
    assert home.generation_start_url(gen).endswith("generations/0001.start.json")
    assert home.generations() == [gen], "a start document is not a generation record"


def test_log_path(home):
    path = home.log_path("driver-1.log")
    assert path == home.p("logs", "driver-1.log") and home.fs.isdir(home.p("logs"))


def test_mark_driver_killed(home):
    status = {"state": "RUNNING", "pid": 9, "host": "h", "last_batch_id": 4}
    at = datetime(2026, 1, 2, tzinfo=UTC)
    ended = home.mark_driver_killed(status, "killed by the watchdog (pid 9): stuck", now=at)
    assert home.status() == ended == {**status, "state": "FAILED", "error": "killed by the watchdog (pid 9): stuck",
                                      "stopped_at": at.isoformat()}
    doc = home.status_document()
    assert doc.state is JobState.FAILED and doc.last_batch_id == 4 and doc.stopped_at == at


def test_status_document(home):
    assert home.status_document() is None
    home.fs.makedirs(home.path, exist_ok=True)
    home.fs.pipe_file(home.p(*layout.STATUS), b"{not json")
    assert home.status() is None and home.status_document() is None, "an unreadable status is none"


def test_the_source_spells_the_stop_handshake_as_the_layout_does():
    """source/control_files.py keeps its own copy of the two names (it must not depend on the job home's
    layout); this keeps them equal to storage.layout's, and the source's drainPath is the home's control/."""
    from airflow_kafka_stream.source import control_files

    assert (*layout.CONTROL, control_files.STOP_FILE) == layout.STOP_REQUEST
    assert (*layout.CONTROL, control_files.DRAINED_FILE) == layout.DRAINED
