"""Bad inputs and unsafe states: the CLI refuses with exit code 2, says why, and changes nothing.

Every case runs on a fresh copy of one job home (a checkpoint real Spark wrote
with a parquet sink, a savepoint) whose consumer group is committed at the
checkpoint; after the refusal the copy's checkpoints, generations, savepoints,
job.json and status (names and bytes) and the group's committed offsets must
be what they were. Operations that got as far as taking the job lock must
have released it and recorded a ``refused`` entry in the history.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from airflow_kafka_stream.kafka.groups import describe_group
from tests.integration.cli_helpers import (
    STATEFUL_CONF,
    Job,
    assert_unchanged,
    cli,
    cli_subprocess,
    make_job,
    snapshot,
)
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def base(spark, kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-refusals")
    topic = create_topic(kafka_bootstrap, unique("cli-refuse"), partitions=2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(None, f"v-{p}-{i}") for i in range(10)], partition=p)
    job = make_job(spark, kafka_bootstrap, root / "home", {topic: 2}, sink=str(root / "sink"))
    assert (root / "sink" / "_spark_metadata").is_dir()
    from airflow_kafka_stream.cli import main

    assert main(["savepoint", "create", "--job-home", str(job.home)]) == 0
    savepoint = sorted(p.name for p in (job.home / "savepoints").iterdir())[-1]
    rocks = make_job(spark, kafka_bootstrap, root / "rocks", {topic: 2}, stateful_conf=STATEFUL_CONF)
    assert (rocks.home / "checkpoints" / "0001" / "state").is_dir()
    return {"job": job, "rocks": rocks, "topic": topic, "savepoint": savepoint, "sink": str(root / "sink")}


# -- setups: each damages or occupies the copied job home before the command runs ----------------------

def truncate_last_offsets(job: Job, env: dict) -> None:
    offsets = job.home / "checkpoints" / "0001" / "offsets"
    last = max((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])


def batch_in_flight(job: Job, env: dict) -> None:
    """offsets/N+1 planned without commits/N+1: what a job killed mid-batch leaves."""
    offsets = job.home / "checkpoints" / "0001" / "offsets"
    last = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    shutil.copyfile(offsets / str(last), offsets / str(last + 1))


def flip_savepoint_byte(job: Job, env: dict) -> None:
    sp = job.home / "savepoints" / env["sp"]
    target = next(p for p in sorted(sp.rglob("*")) if p.is_file() and "offsets" in p.parts and p.name.isdigit())
    data = bytearray(target.read_bytes())
    data[-2] ^= 0x01
    target.write_bytes(bytes(data))


def job_running(job: Job, env: dict) -> None:
    now = time.time()
    (job.home / "status.json").write_text(json.dumps({
        "state": "RUNNING", "job": "refusals", "application_id": "local-1234", "heartbeat_epoch": now,
        "heartbeat": datetime.fromtimestamp(now, UTC).isoformat()}))


def job_draining(job: Job, env: dict) -> None:
    job_running(job, env)
    status = json.loads((job.home / "status.json").read_text())
    (job.home / "status.json").write_text(json.dumps({**status, "state": "DRAINING"}))


def lock_held(job: Job, env: dict) -> None:
    (job.home / "lock").write_text(json.dumps({"operation": "restore", "holder": "alice@ops-box:4242",
                                               "acquired_at": "2026-01-01T00:00:00+00:00"}))


def empty_dir(job: Job, env: dict) -> None:
    (Path(env["tmp"]) / "empty").mkdir()


def random_dir(job: Job, env: dict) -> None:
    d = Path(env["tmp"]) / "random"
    (d / "offsets").mkdir(parents=True)
    (d / "notes.txt").write_text("not a checkpoint")
    (d / "offsets" / "x").write_text("hello")


def bare_dir(job: Job, env: dict) -> None:
    d = Path(env["tmp"]) / "nothing"
    d.mkdir()
    (d / "readme.txt").write_text("no job.json, no checkpoints")


def a_file(job: Job, env: dict) -> None:
    (Path(env["tmp"]) / "afile").write_text("not a directory")


def properties(text: str) -> Callable[[Job, dict], None]:
    """A --command-config file at {tmp}/client.properties."""
    def write(job: Job, env: dict) -> None:
        (Path(env["tmp"]) / "client.properties").write_text(text)

    return write


JAAS = ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required \\\n    username="alice" \\\n    password="jaas-s3cret";\n')


def csv_file(text: str) -> Callable[[Job, dict], None]:
    def write(job: Job, env: dict) -> None:
        (Path(env["tmp"]) / "plan.csv").write_text(text.format(**env))

    return write


# -- the cases ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    phrase: str  # a key phrase of the message on stderr (case-insensitive)
    reason: str  # why this must be refused
    setup: Callable[[Job, dict], None] | None = None
    recorded: str | None = None  # the history operation a refusal under the lock records
    extra: dict = field(default_factory=dict)
    hidden: str | None = None  # a secret the message must not repeat
    flags: tuple[str, ...] = ()  # the CLI options the message must name as the way out


H = ("--job-home", "{home}")
RESET = ("reset", *H)
X = "--execute"
CC = ("--command-config", "{tmp}/client.properties")

CASES = {
    # scope
    "unknown-topic": Case((*RESET, "--to-earliest", "--topic", "nosuch-topic", X), "not one of the job's topics",
                          "a scope naming a topic the job does not read", recorded="reset", flags=("--topic",)),
    "unknown-partition": Case((*RESET, "--to-earliest", "--topic", "{topic}:99", X), "partition(s) 99",
                              "the topic has 2 partitions", recorded="reset"),
    "malformed-scope": Case((*RESET, "--to-earliest", "--topic", "{topic}:a,b", X), "comma-separated list",
                            "partitions must be numbers", recorded="reset"),
    # to-offset
    "negative-offset": Case((*RESET, "--to-offset=-5", X), ">= 0", "-5 is not an offset (no special values here)",
                            recorded="reset"),
    "non-numeric-offset": Case((*RESET, "--to-offset", "abc", X), "not a whole number", "offsets are integers",
                               recorded="reset"),
    "malformed-partition-offsets": Case((*RESET, "--to-offset", "{topic}:0=5,{topic}1=7", X),
                                        "is not TOPIC:PARTITION=OFFSET", "the second item has no ':'",
                                        recorded="reset"),
    "partition-offset-non-numeric": Case((*RESET, "--to-offset", "{topic}:0=five", X),
                                         "is not TOPIC:PARTITION=OFFSET", "the offset is not a number",
                                         recorded="reset"),
    "partition-offset-negative": Case((*RESET, "--to-offset", "{topic}:0=-3", X), ">= 0",
                                      "a negative per-partition offset", recorded="reset"),
    "partition-offset-unknown-topic": Case((*RESET, "--to-offset", "other-topic:0=5", X), "other-topic",
                                           "offsets for a topic the job does not read", recorded="reset"),
    "strict-out-of-range": Case((*RESET, "--to-offset", "1000", "--strict", X), "high watermark",
                                "--strict refuses instead of clamping", recorded="reset",
                                flags=("--to-offset", "--strict")),
    # shift-by
    "shift-by-non-numeric": Case((*RESET, "--shift-by", "back", X), "invalid int value", "argparse: not an int"),
    # from-file
    "csv-wrong-columns": Case((*RESET, "--from-file", "{tmp}/plan.csv", X), "expected 3 columns",
                              "a row with two columns", setup=csv_file("{topic},0\n"), recorded="reset"),
    "csv-non-numeric-offset": Case((*RESET, "--from-file", "{tmp}/plan.csv", X), "not a whole number",
                                   "offset 'abc'", setup=csv_file("{topic},0,abc\n"), recorded="reset"),
    "csv-duplicate-partition": Case((*RESET, "--from-file", "{tmp}/plan.csv", X), "already set on line 1",
                                    "two lines for partition 0", setup=csv_file("{topic},0,1\n{topic},0,2\n"),
                                    recorded="reset"),
    "csv-unknown-topic": Case((*RESET, "--from-file", "{tmp}/plan.csv", X), "nosuch-topic",
                              "a topic the job does not read", setup=csv_file("nosuch-topic,0,1\n"),
                              recorded="reset"),
    "csv-unknown-partition": Case((*RESET, "--from-file", "{tmp}/plan.csv", X), "99",
                                  "partition 99 does not exist", setup=csv_file("{topic},99,1\n"), recorded="reset"),
    "csv-empty": Case((*RESET, "--from-file", "{tmp}/plan.csv", X), "plan.csv is empty", "an empty plan",
                      setup=csv_file("\n"), recorded="reset"),
    "csv-missing-file": Case((*RESET, "--from-file", "{tmp}/nope.csv", X), "does not exist",
                             "the file is not there", recorded="reset"),
    # to-datetime / by-duration
    "datetime-without-zone": Case((*RESET, "--to-datetime", "2024-05-01T12:00:00", X), "has no timezone",
                                  "a naive time is ambiguous by hours", recorded="reset"),
    "datetime-garbage": Case((*RESET, "--to-datetime", "yesterday", X), "not understood",
                             "not ISO 8601", recorded="reset"),
    "datetime-impossible": Case((*RESET, "--to-datetime", "2024-13-45T00:00:00Z", X), "not a valid date-time",
                                "month 13", recorded="reset"),
    "unknown-timezone": Case((*RESET, "--to-datetime", "2024-05-01T12:00:00", "--timezone", "Mars/Olympus", X),
                             "is unknown", "no such IANA zone", recorded="reset", flags=("--timezone",)),
    "duration-1h": Case((*RESET, "--by-duration", "1h", X), "not an ISO 8601 duration", "Kafka takes PT1H",
                        recorded="reset"),
    "duration-weeks": Case((*RESET, "--by-duration", "P1W", X), "weeks", "weeks are refused: count days",
                           recorded="reset"),
    # strategy selection
    "two-strategies": Case((*RESET, "--to-earliest", "--to-latest", X), "not allowed with argument",
                           "strategies are mutually exclusive"),
    "no-strategy": Case((*RESET, X), "one of the arguments", "a reset needs a strategy"),
    # what the job is
    "missing-job-home": Case(("reset", "--to-earliest", X), "--job-home", "nothing says which job"),
    "missing-job-home-savepoint": Case(("savepoint", "list"), "needs the job's home directory [job_home: --job-home]", "savepoints live in the home"),
    "not-a-job-home": Case(("reset", "--job-home", "{tmp}/nothing", "--to-earliest", X), "is not a job home",
                           "neither job.json nor checkpoints/", setup=bare_dir),
    "status-not-a-job-home": Case(("status", "--job-home", "{tmp}/nothing"), "is not a job home",
                                  "a mistyped home is refused, not reported as a job that never started",
                                  setup=bare_dir),
    "status-missing-job-home": Case(("status",), "needs the job's home directory [job_home: --job-home]",
                                    "nothing says which job"),
    "checkpoint-empty-dir": Case((*RESET, "--checkpoint", "{tmp}/empty", "--to-earliest", X), "not a Spark checkpoint",
                                 "an empty directory", setup=empty_dir, recorded="reset"),
    "checkpoint-random-dir": Case((*RESET, "--checkpoint", "{tmp}/random", "--to-earliest", X),
                                  "not a Spark checkpoint", "files, but no metadata", setup=random_dir,
                                  recorded="reset"),
    "checkpoint-position-empty-dir": Case(("checkpoint", "--checkpoint", "{tmp}/empty"), "not a Spark checkpoint",
                                          "inspecting a non-checkpoint is refused too", setup=empty_dir),
    "truncated-offsets": Case((*RESET, "--to-earliest", X), "offsets/0", "the last offsets file lost its tail",
                              setup=truncate_last_offsets, recorded="reset"),
    "batch-in-flight": Case((*RESET, "--to-earliest", X), "in flight", "commits/N is missing: a batch in flight",
                            setup=batch_in_flight, recorded="reset"),
    "bad-storage-options": Case((*RESET, "--to-earliest", "--storage-options", "{{nope", X), "not valid JSON",
                                "argparse: --storage-options must be JSON"),
    "missing-command-config": Case((*RESET, "--to-earliest", "--command-config", "{tmp}/client.properties", X),
                                   "cannot read client config file", "the properties file is not there",
                                   flags=("--command-config",)),
    # savepoints
    "restore-bad-checksum": Case(("restore", *H, "--savepoint", "{sp}"), "does not match the manifest",
                                 "a savepoint file was changed after creation", setup=flip_savepoint_byte,
                                 recorded="restore"),
    "to-savepoint-bad-checksum": Case((*RESET, "--to-savepoint", "{sp}", X), "does not match the manifest",
                                      "a damaged savepoint must not be trusted for its offsets either",
                                      setup=flip_savepoint_byte, recorded="reset"),
    "restore-unknown-savepoint": Case(("restore", *H, "--savepoint", "sp-nope"), "sp-nope",
                                      "no such savepoint", recorded="restore"),
    "to-savepoint-unknown": Case((*RESET, "--to-savepoint", "sp-nope", X), "sp-nope", "no such savepoint",
                                 recorded="reset"),
    "show-unknown-savepoint": Case(("savepoint", "show", "sp-nope", *H), "sp-nope", "no such savepoint"),
    "delete-unknown-savepoint": Case(("savepoint", "delete", "sp-nope", *H), "sp-nope", "no such savepoint",
                                     recorded="savepoint-delete"),
    "savepoint-id-with-slash": Case(("savepoint", "delete", "../checkpoints", *H), "is invalid",
                                    "an id must not escape savepoints/", recorded="savepoint-delete"),
    "prune-keep-last-0": Case(("savepoint", "prune", *H, "--keep-last", "0"), "at least 1",
                              "pruning must keep the newest"),
    "prune-nothing-to-keep-by": Case(("savepoint", "prune", *H), "--keep-last", "prune needs a retention rule"),
    "stop-negative-timeout": Case(("stop", *H, "--timeout", "-1"), "timeout must be a positive number of seconds, got -1.0 [timeout: --timeout]",
                                  "a wait that cannot last"),
    "verify-bad-stall-threshold": Case(("verify", *H, "--stall-threshold", "10m"), "ISO 8601",
                                       "durations are ISO 8601, like PT10M"),
    # state and sinks
    "drop-state-file-sink": Case((*RESET, "--to-earliest", "--drop-state", "--sink-path", "{sink}", X),
                                 "_spark_metadata", "a fresh checkpoint restarts batch ids the sink already logged",
                                 recorded="reset", flags=("--allow-sink-batch-log",)),
    "restore-drop-state-file-sink": Case(("restore", *H, "--savepoint", "{sp}", "--drop-state", "--sink-path",
                                          "{sink}"), "_spark_metadata", "same, for restore", recorded="restore"),
    "drop-state-file-sink-from-job-json": Case((*RESET, "--to-earliest", "--drop-state", X), "_spark_metadata",
                                              "job.json records the sink path; --sink-path is not needed",
                                              recorded="reset"),
    "restore-drop-state-file-sink-from-job-json": Case(("restore", *H, "--savepoint", "{sp}", "--drop-state"),
                                                       "_spark_metadata", "same, for restore", recorded="restore"),
    "rocksdb-without-drop-state": Case(("reset", "--job-home", "{rocks}", "--to-earliest", X), "RocksDB",
                                       "RocksDB state cannot be carried to an appended batch",
                                       recorded="reset", extra={"home": "rocks"}, flags=("--drop-state",)),
    "rocksdb-and-sink-without-log": Case(("reset", "--job-home", "{rocks}", "--to-earliest", "--sink-path",
                                          "{tmp}/empty", X), "refused for 2 reasons",
                                         "a file sink without its batch log and RocksDB state: both named at once",
                                         setup=empty_dir, recorded="reset", extra={"home": "rocks"},
                                         flags=("--sink-kind", "--sink-path", "--drop-state")),
    "rocksdb-and-sink-log-ahead": Case(("reset", "--job-home", "{rocks}", "--to-earliest", "--sink-path", "{sink}", X),
                                       "with drop_state it would then be refused for this too",
                                       "RocksDB asks for drop_state, and drop_state restarts batch ids the sink "
                                       "logged: the second refusal is named with the first",
                                       recorded="reset", extra={"home": "rocks"},
                                       flags=("--drop-state", "--allow-sink-batch-log")),
    # the job's state
    "job-running-reset": Case((*RESET, "--to-earliest", X), "is running", "a fresh RUNNING heartbeat",
                              setup=job_running, recorded="reset"),
    "job-running-restore": Case(("restore", *H, "--savepoint", "{sp}"), "is running", "a fresh RUNNING heartbeat",
                                setup=job_running, recorded="restore"),
    "job-draining-savepoint": Case(("savepoint", "create", *H), "the job is stopping",
                                   "a live savepoint is not taken while the job drains (a running one is taken "
                                   "live: test_live_savepoints.py)", setup=job_draining, recorded="savepoint-create"),
    # Refused at the lock, before the operation began; recorded, so whoever asked finds why in the history.
    "lock-held": Case((*RESET, "--to-earliest", X), "locked by alice@ops-box:4242", "another operation holds it",
                      setup=lock_held, recorded="reset"),
    "lock-held-restore": Case(("restore", *H, "--savepoint", "{sp}"), "locked by alice@ops-box:4242",
                              "another operation holds it", setup=lock_held, recorded="restore"),
    "unreachable-broker": Case((*RESET, "--to-earliest", "--bootstrap-server", "127.0.0.1:1", X), "127.0.0.1:1",
                               "nothing listens on port 1", recorded="reset"),
    # storage URLs: refused up front, naming the supported schemes
    "checkpoint-ftp-url": Case((*RESET, "--checkpoint", "ftp://files.example.invalid/ck", "--to-earliest", X),
                               "'ftp' is not supported", "ftp cannot hold a checkpoint; it was a traceback"),
    "job-home-unknown-scheme": Case(("reset", "--job-home", "nosuch://jobs/orders", "--to-earliest", X),
                                    "s3:// or s3a:// (pip install s3fs)", "no filesystem has that scheme"),
    "job-home-unknown-scheme-history": Case(("history", "--job-home", "nosuch://jobs/orders"), "'nosuch'",
                                            "every command opens the home the same way"),
    "job-home-s3-without-bucket": Case(("savepoint", "list", "--job-home", "s3://"), "names no bucket",
                                       "s3:// alone names no bucket"),
    "checkpoint-url-slash-missing": Case(("checkpoint", "--checkpoint", "s3:/bucket/ck"), "write s3://bucket/ck",
                                         "fsspec would take it for a relative local directory"),
    "checkpoint-is-a-file": Case(("checkpoint", "fsck", "--checkpoint", "{tmp}/afile"), "is a file",
                                 "a file is not a checkpoint directory; it was a traceback", setup=a_file),
    "sink-path-unsupported": Case((*RESET, "--to-earliest", "--drop-state", "--sink-path", "ftp://h/out", X),
                                  "'ftp' is not supported", "the sink's log cannot be kept there"),
    # empty values are mistakes (an unset shell variable), never "not given"
    "empty-group": Case((*RESET, "--to-earliest", "--group", "", X), "--group: is empty",
                        "it used to mean the job's group"),
    "empty-checkpoint": Case((*RESET, "--checkpoint", "", "--to-earliest", X), "--checkpoint: is empty",
                             "it used to mean the job's current checkpoint"),
    "empty-bootstrap-server": Case((*RESET, "--bootstrap-server", "", "--to-earliest", X),
                                   "--bootstrap-server: is empty", "it used to mean job.json's brokers"),
    "empty-job-home": Case(("reset", "--job-home", "", "--checkpoint", "{home}/checkpoints/0001", "--to-earliest"),
                           "--job-home: is empty", "it used to be ignored beside --checkpoint"),
    "empty-topic": Case((*RESET, "--to-earliest", "--topic", "", X), "--topic: is empty", "a scope of nothing"),
    "empty-sink-path": Case((*RESET, "--to-earliest", "--drop-state", "--sink-path", "", X),
                            "sink_path is empty", "it used to mean job.json's sink"),
    "empty-restore-savepoint": Case(("restore", *H, "--savepoint", ""), "--savepoint: is empty", "no savepoint named"),
    "empty-savepoint-id": Case(("savepoint", "validate", *H, ""), "savepoint_id: is empty", "no savepoint named"),
    "empty-command-config": Case((*RESET, "--to-earliest", "--command-config", "", X), "--command-config: is empty",
                                 "it used to mean no client settings at all"),
    # client settings librdkafka does not take: refused before the lock, secrets never repeated
    "client-java-jaas": Case((*RESET, "--to-earliest", *CC, X), "sasl.username", "a Java JAAS line",
                             setup=properties(JAAS), hidden="jaas-s3cret"),
    "client-java-jaas-verify": Case(("verify", *H, *CC), "'sasl.jaas.config'", "verify reads the same file",
                                    setup=properties(JAAS), hidden="jaas-s3cret"),
    "client-bad-security-protocol": Case((*RESET, "--to-earliest", *CC, X), "'security.protocol'",
                                         "no such protocol", setup=properties("security.protocol=SASL_SSLX\n")),
    "client-java-truststore": Case((*RESET, "--to-earliest", *CC, X), "ssl.ca.location",
                                   "librdkafka reads no Java truststore",
                                   setup=properties("security.protocol=SSL\nssl.truststore.location=/etc/ts.jks\n"
                                                    "ssl.truststore.password=ts-s3cret\n"), hidden="ts-s3cret"),
    "client-jks-keystore": Case((*RESET, "--to-earliest", *CC, X), "PKCS#12", "JKS is a Java format",
                                setup=properties("ssl.keystore.type=JKS\nssl.keystore.password=ks-s3cret\n"),
                                hidden="ks-s3cret"),
    "client-sasl-without-credentials": Case((*RESET, "--to-earliest", *CC, X), "sasl.username and sasl.password",
                                            "librdkafka cannot log in without them",
                                            setup=properties("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")),
    "client-malformed-secret-line": Case((*RESET, "--to-earliest", *CC, X), "line 2",
                                         "a line that is not key=value, holding a password",
                                         setup=properties("security.protocol=SASL_SSL\n=line-s3cret\n"),
                                         hidden="line-s3cret"),
}


def prepare(base: dict, case: Case, tmp_path: Path) -> tuple[Job, dict]:
    source = base["rocks"] if case.extra.get("home") == "rocks" else base["job"]
    job = source.copy(tmp_path / "home")
    env = {"home": str(job.home), "topic": base["topic"], "tmp": str(tmp_path), "sp": base["savepoint"],
           "sink": base["sink"], "rocks": str(job.home)}
    if case.setup:
        case.setup(job, env)
    return job, env


def check_refused(job: Job, before, result_code: int, err: str, case: Case, history_before: int,
                  lock_before: bytes | None) -> None:
    assert result_code == 2, f"exit code {result_code}; stderr: {err}"
    assert case.phrase.lower() in err.lower(), f"stderr does not name the problem ({case.phrase!r}): {err}"
    for flag in case.flags:
        assert flag in err, f"stderr does not name the option {flag}: {err}"
    if case.flags:
        assert err.count("error:") == 1, "one message, whatever the number of reasons"
    assert "Traceback" not in err
    if case.hidden:
        assert case.hidden not in err, "the message repeats a secret"
    assert_unchanged(job, before)
    lock = job.home / "lock"
    if lock_before is None:
        assert not lock.exists(), "the lock was released"
    else:
        assert lock.read_bytes() == lock_before, "someone else's lock is left alone"
    new = job.history()[history_before:]
    if case.recorded:
        assert [(r["operation"], r["result"]) for r in new] == [(case.recorded, "refused")], new
        assert new[0]["error"]
    else:
        assert new == [], "refused before the lock: nothing to record"


@pytest.mark.parametrize("name", list(CASES), ids=list(CASES))
def test_refused_and_nothing_changed(capsys, base, tmp_path, name):
    case = CASES[name]
    job, env = prepare(base, case, tmp_path)
    before = snapshot(job)
    history_before = len(job.history())
    lock_before = (job.home / "lock").read_bytes() if (job.home / "lock").exists() else None
    started = time.monotonic()
    result = cli(capsys, *(a.format(**env) for a in case.args))
    elapsed = time.monotonic() - started
    check_refused(job, before, result.code, result.err, case, history_before, lock_before)
    assert elapsed < 15, f"refusing took {elapsed:.1f}s"


@pytest.mark.parametrize("name", ["unreachable-broker", "lock-held", "csv-duplicate-partition", "two-strategies",
                                  "client-java-jaas", "job-home-unknown-scheme", "empty-group"])
def test_refused_by_the_console_script(base, tmp_path, name):
    """The installed command, as a user runs it: exit status 2 and the reason on stderr."""
    case = CASES[name]
    job, env = prepare(base, case, tmp_path)
    before = snapshot(job)
    history_before = len(job.history())
    lock_before = (job.home / "lock").read_bytes() if (job.home / "lock").exists() else None
    started = time.monotonic()
    proc = cli_subprocess(*(a.format(**env) for a in case.args), timeout=30)
    elapsed = time.monotonic() - started
    check_refused(job, before, proc.returncode, proc.stderr, case, history_before, lock_before)
    assert proc.stdout == "", "nothing printed as if it had worked"
    assert elapsed < 20, f"refusing took {elapsed:.1f}s"


@pytest.fixture(params=["classic", "consumer"])
def foreign_consumer(request, base):
    """A consumer that is not the job, subscribed with the job's group id under either group protocol (KIP-848's
    ``consumer`` or the classic one); yields its client.id once it is assigned and the group lists it."""
    job = base["job"]
    client_id = f"foreign-{request.param}-reader"
    settings = {"bootstrap.servers": job.bootstrap, "group.id": job.group, "client.id": client_id,
                "enable.auto.commit": False, "auto.offset.reset": "latest", "group.protocol": request.param}
    if request.param == "classic":  # the session settings belong to the coordinator under KIP-848
        settings.update({"session.timeout.ms": 6000, "max.poll.interval.ms": 7000})
    consumer = Consumer(settings)
    consumer.subscribe([base["topic"]])
    assigned = threading.Event()
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            consumer.poll(0.2)
            if consumer.assignment():
                assigned.set()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        assert assigned.wait(30), "the consumer was never assigned"
        config = {"bootstrap.servers": job.bootstrap}
        deadline = time.monotonic() + 15
        while not describe_group(config, job.group).members and time.monotonic() < deadline:
            time.sleep(0.3)
        yield client_id
    finally:
        stop.set()
        thread.join(10)
        consumer.close()


def test_refused_while_another_consumer_is_in_the_group(capsys, base, tmp_path, foreign_consumer):
    """The job is stopped (no heartbeat) but someone else consumes with its group id: reset and restore refuse,
    naming that consumer's client.id and host, and change nothing; verify lists it as a member."""
    job = base["job"].copy(tmp_path / "home")
    before = snapshot(job)
    history_before = len(job.history())
    reset = cli(capsys, "reset", "--job-home", str(job.home), "--to-earliest", "--execute")
    named = Case((), f"client.id {foreign_consumer} on host /127.0.0.1", "", recorded="reset")
    check_refused(job, before, reset.code, reset.err, named, history_before, None)
    assert "active member(s) that are not the job" in reset.err

    restore = cli(capsys, "restore", "--job-home", str(job.home), "--savepoint", base["savepoint"])
    check_refused(job, before, restore.code, restore.err, replace(named, recorded="restore"), history_before + 1,
                  None)

    verified = cli(capsys, "verify", "--job-home", str(job.home), "--json")
    described = verified.json()["group_description"]
    assert described["state"] == "Stable" and described["protocol"] == foreign_consumer.split("-")[1]
    assert [(m["client_id"], m["host"]) for m in described["members"]] == [(foreign_consumer, "/127.0.0.1")]
    assert sorted(described["members"][0]["assignment"]) == [f"{base['topic']}:0", f"{base['topic']}:1"]
    text = cli(capsys, "verify", "--job-home", str(job.home)).out
    assert f"client.id {foreign_consumer} on host /127.0.0.1" in text and "1 member(s)" in text, text


def test_verify_shows_a_group_without_members(capsys, base, tmp_path):
    job = base["job"].copy(tmp_path / "home")
    verified = cli(capsys, "verify", "--job-home", str(job.home), "--json")
    assert verified.code == 0, verified.err
    described = verified.json()["group_description"]
    # The protocol is the last member's: a group a KIP-848 consumer used stays a "consumer" group when it leaves.
    assert (described["group"], described["state"], described["members"]) == (job.group, "Empty", [])
    assert f"group {job.group}: Empty ({described['protocol']} protocol), 0 member(s)" in cli(
        capsys, "verify", "--job-home", str(job.home)).out


def test_every_case_names_a_reason():
    assert len(CASES) >= 60
    assert all(case.reason and case.phrase for case in CASES.values())


def test_unreachable_broker_stderr_is_the_error_only(base, tmp_path):
    job = base["job"].copy(tmp_path / "home")
    proc = cli_subprocess("verify", "--job-home", str(job.home), "--bootstrap-server", "127.0.0.1:1", timeout=30)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) <= 3 and lines[-1].startswith("error:"), f"{len(lines)} lines on stderr"


def test_reset_keeps_the_sink_log_of_job_json_whole(capsys, base, tmp_path):
    """job.json names the file sink: the appended batch gets its `_spark_metadata` entry without --sink-path."""
    job = base["job"].copy(tmp_path / "home")
    sink = tmp_path / "sink"
    shutil.copytree(base["sink"], sink)
    spec = json.loads((job.home / "job.json").read_text())
    (job.home / "job.json").write_text(json.dumps({**spec, "sink_path": str(sink)}))
    result = cli(capsys, "reset", "--job-home", str(job.home), "--to-offset", "3", "--execute", "--json")
    assert result.code == 0, result.err
    batch = result.json()["batch_id"]
    assert (sink / "_spark_metadata" / str(batch)).exists(), sorted(p.name for p in (sink / "_spark_metadata").iterdir())


def test_the_options_a_refusal_names_are_the_way_out(capsys, base, tmp_path):
    """RocksDB state and a sink log ahead: the two options the refusal names are all the reset then needs."""
    job = base["rocks"].copy(tmp_path / "home")
    reset = ["reset", "--job-home", str(job.home), "--to-earliest", "--sink-path", base["sink"], "--execute"]
    refused = cli(capsys, *reset)
    assert refused.code == 2
    assert "[drop_state: --drop-state; allow_sink_batch_log: --allow-sink-batch-log]" in refused.err, refused.err
    generation = job.jobhome.current_generation()
    done = cli(capsys, *reset, "--drop-state", "--allow-sink-batch-log", "--json")
    assert done.code == 0, done.err
    assert done.json()["generation"] == generation + 1


def test_a_submit_naming_a_topic_kafka_lacks_is_refused_before_anything_is_launched(kafka_bootstrap, tmp_path):
    """No broker creates a topic because a client asks for it: the driver would fail on its first batch, so the
    submit refuses, naming the topic and the flag, and launches nothing."""
    missing = unique("no-such-topic")
    home = tmp_path / "home"
    done = cli_subprocess("submit", "--job-home", home, "--bootstrap-server", kafka_bootstrap, "--app-version", "1",
                          "--topic", missing, "--group", unique("g"), "--output", tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"topic(s) {missing} do not exist" in done.stderr and "[topics: --topic]" in done.stderr
    assert "nothing was launched" in done.stderr
    assert not home.exists() or not any(home.rglob("*")), "the job home holds nothing: no launch, no submission"
