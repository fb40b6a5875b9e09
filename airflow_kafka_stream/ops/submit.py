"""Submit a streaming job: start a detached driver unless one of this version already runs or starts, then
wait until it is RUNNING with its first batches — one phased machine.

*request* (:func:`submit`, or :func:`replay` of a recorded submission) → *look* (:func:`look_started`) →
*conclude* (:func:`conclude_start`). The command line runs the loop in :func:`submit_and_wait`; the
submit operator runs the same steps around its in-slot wait and its trigger.

The driver outlives whoever submitted it (a streaming query runs for days): the :class:`Launcher` starts it
in its own session with its output in a log file and returns at once. The decision (launch, wait for the
driver that is there, or refuse) is ``core.submit_rules``; this module reads the job home, records the
launch so a retried submit sees a driver that has not heart-beaten yet, records the submission so the
same version can be started again exactly so (a rollback, a watchdog restart), and writes the history.

Kafka secrets reach the driver through its environment (the launcher's), never through its arguments.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_stream.core.batch_marker import marker_group, transactional_id
from airflow_kafka_stream.core.driver_log import driver_error
from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.job_watch import WaitStatus, WatchSpec
from airflow_kafka_stream.core.redaction import redact_text
from airflow_kafka_stream.core.status_document import StatusDocument, written_state
from airflow_kafka_stream.core.submit_rules import SubmitAction, decide_submit
from airflow_kafka_stream.errors import (
    InvalidInputError,
    JobStateError,
    KafkaAccessError,
    OperationIncompleteError,
    StreamError,
)
from airflow_kafka_stream.kafka import metadata
from airflow_kafka_stream.kafka.transactions import check_transactions
from airflow_kafka_stream.ops.launcher import (
    CLIENT_CONFIG_ENV,
    EXAMPLE_PIPELINE,
    LaunchedDriver,
    Launcher,
    Submission,
    check_launch,
    example_option,
    example_pipeline_topics,
)
from airflow_kafka_stream.ops.results import SubmitResult
from airflow_kafka_stream.ops.watch import look_job, wait
from airflow_kafka_stream.storage.files import client_config_from_env, is_local
from airflow_kafka_stream.storage.jobhome import JobHome
from airflow_kafka_stream.storage.operation import recorded_operation
from airflow_kafka_stream.storage.processes import driver_gone, process_alive

__all__ = ["CLIENT_CONFIG_ENV", "LaunchedDriver", "SubmitResult", "client_config_from_env", "conclude_start",
           "look_started", "recorded_submission", "replay", "submit", "submit_and_wait"]

LAUNCHED, ALREADY_RUNNING, HANDED_OVER = "launched", "already-running", "handed-over"


def driver_log_path(home: JobHome, now: datetime, prefix: str = "driver") -> str:
    """Where a new driver's output goes: the job home's logs/ when local, else a local temporary folder."""
    name = f"{prefix}-{now:%Y%m%dT%H%M%SZ}.log"
    if is_local(home.fs):
        return home.log_path(name)
    folder = os.path.join(tempfile.gettempdir(), "airflow-kafka-stream", home.url.replace("://", "_").replace("/", "_"))
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, name)


def recorded_submission(home: JobHome, app_version: str) -> Submission:
    """How ``app_version`` was last submitted (application, arguments, settings; never a secret); an empty
    ``app_version`` is the version the job ran last (job.json's), for a restart as it was."""
    if not str(app_version or "").strip():
        app_version = (home.spec() or {}).get("version") or ""
        if not app_version:
            raise JobStateError(f"job {home.url} records no version it ran; give the version to start",
                                setting="app_version")
    found = home.submission(str(app_version))
    if found is None:
        raise JobStateError(f"job {home.url} has no recorded submission of version {app_version}; submit that "
                            "version with its application and arguments instead", setting="application")
    return Submission.from_record(found)


def record_submission(home: JobHome, submission: Submission, now: datetime) -> None:
    home.record_submission(submission.app_version, {**submission.to_record(), "submitted_at": now.isoformat()})


def submit(home: JobHome, submission: Submission, launcher: Launcher, *, by: str | None = None,
           now: datetime | None = None, max_heartbeat_age: float = 30.0, start_grace_seconds: float = 180.0,
           cause: str | None = None) -> SubmitResult:
    """Start ``submission``'s driver through ``launcher`` unless a driver of its version runs or starts.

    The submission is recorded under ``submissions/`` so the same version can be started again later.
    ``cause`` says who started it when it was not a person or a DAG's own submit (the watchdog counts its
    own restarts by it).
    """
    now = now or datetime.now(UTC)
    version = submission.app_version
    check_launch(launcher, submission)  # bad input is refused before the job home is touched
    check_topics_exist(submission, launcher)
    # No driver was ever launched from this job home nor wrote its status: none can run, so a cluster refusing
    # the sink's transactions is refused before the home is touched (a first submit leaves nothing behind).
    fresh = home.launch_record() is None and home.status_document() is None
    if fresh:
        check_sink_transactions(submission, launcher)
    # A first submit makes the job home: there is nothing to require yet.
    with recorded_operation(home, "submit", {"app_version": version, "cause": cause}, by=by,
                            existing_home=False) as record:
        status = home.status_document()
        previous = home.launch_record()
        decision = decide_submit(status=status, running_version=_running_version(home, status),
                                 launch_record=previous,
                                 launcher_alive=process_alive((previous or {}).get("pid"), (previous or {}).get("host")),
                                 version=version, now=now, max_heartbeat_age=max_heartbeat_age,
                                 start_grace_seconds=start_grace_seconds, processes_gone=driver_gone(status))
        record["before"] = {"state": written_state(status), "launched": previous}
        if decision.action is SubmitAction.REFUSE:
            raise JobStateError(f"job {home.url}: {decision.reason}")
        if decision.action is SubmitAction.WAIT:
            result = SubmitResult(ALREADY_RUNNING, decision.reason, version, now.isoformat())
            record["after"] = result.to_dict()
            return result
        if not fresh:  # here, not before: the check fences a driver of the job, and none runs now
            check_sink_transactions(submission, launcher)
        driver = launcher.launch(submission, driver_log_path(home, now))
        home.record_launch({"pid": driver.pid, "host": driver.host, "launched_at": now.isoformat(),
                            "app_version": version, "log": driver.log, "application_id": driver.application_id})
        record_submission(home, submission, now)
        result = SubmitResult(LAUNCHED, decision.reason, version, now.isoformat(), driver.pid, driver.log,
                              driver.host, driver.application_id)
        record["after"] = result.to_dict()
        return result


def check_topics_exist(submission: Submission, launcher: Launcher) -> None:
    """Refuse, before anything is launched, a submission of the example pipeline that names a topic Kafka does
    not have: its driver would fail on its first batch minutes later, and no broker creates a topic because a
    client asks for it (``auto.create.topics.enable`` is off on managed clusters)."""
    topics = example_pipeline_topics(submission)
    if topics:
        try:
            metadata.list_topic_partitions(launcher.kafka, topics=topics)
        except InvalidInputError as exc:
            raise InvalidInputError(f"nothing was launched: {exc}", setting="topics") from exc


def check_sink_transactions(submission: Submission, launcher: Launcher) -> None:
    """Refuse, before its driver is launched, a submission of the example pipeline writing to a Kafka topic
    (``--output-topic``) on a cluster that will not give its transactional sink transactions (no transaction log,
    an ACL refusing its transactional id or marker group): its first batch would fail with that minutes later."""
    args = submission.application_args
    topic = example_option(args, "--output-topic") if submission.program == EXAMPLE_PIPELINE else None
    if not topic:
        return
    job = example_option(args, "--job-name") or str(example_option(args, "--home")).rstrip("/").rsplit("/", 1)[-1]
    try:
        check_transactions(launcher.kafka, transactional_id(job, topic),
                           marker_group(str(example_option(args, "--group"))), topic)
    except StreamError as exc:
        raise KafkaAccessError(f"nothing was launched: {exc}") from None


def replay(home: JobHome, app_version: str, launcher: Launcher, *, by: str | None = None,
           cause: str | None = None, max_heartbeat_age: float = 30.0) -> SubmitResult:
    """Start ``app_version`` exactly as it was last submitted to this job home (a rollback, a restart)."""
    return submit(home, recorded_submission(home, app_version), launcher, by=by, cause=cause,
                  max_heartbeat_age=max_heartbeat_age)


def started_spec(submitted: SubmitResult, min_batches: int = 1) -> WatchSpec:
    """What the wait for a submitted driver expects: RUNNING, with ``min_batches`` batches of a run that
    started after the submit (a driver that was already running counts as it is)."""
    newer = None if submitted.action == ALREADY_RUNNING else datetime.fromisoformat(submitted.submitted_at)
    return WatchSpec.of([JobState.RUNNING], min_batches, newer)


def look_started(home: JobHome, submitted: SubmitResult, min_batches: int = 1) -> dict[str, Any]:
    """One look at a submitted driver: RUNNING with its batches, failed (its process exited first), or not
    yet."""
    return look_job(home, started_spec(submitted, min_batches), submitted.pid, submitted.host)


def conclude_start(home: JobHome, submitted: SubmitResult, event: Mapping[str, Any],
                   secrets: list[str] | None = None) -> dict[str, Any]:
    """The end of the wait for a submitted driver: the running job (its generation, last batch, where the
    generation started), or an error with the driver's error and the end of its log: OperationIncompleteError
    when this submit started a driver (something changed: it may still run), else JobStateError."""
    if event.get("status") != WaitStatus.SUCCESS:
        tail = log_tail(submitted.driver_log, secrets)
        error = driver_error(tail)
        failure = JobStateError if submitted.action == ALREADY_RUNNING else OperationIncompleteError
        raise failure(
            f"job {home.url} version {submitted.app_version} did not become healthy: {event.get('message')}"
            + (f"\nthe driver's error: {error}" if error else ""), log=submitted.driver_log, log_tail=tail)
    job = dict(event.get("job") or {})
    generation = job.get("generation")
    return {**job, "app_version": submitted.app_version, "pid": submitted.pid, "driver_log": submitted.driver_log,
            "submit": submitted.action,
            "start_offsets": None if generation is None else home.generation_start_offsets(int(generation))}


def submit_and_wait(home: JobHome, submission: Submission, launcher: Launcher, *, min_batches: int = 1,
                    timeout: float = 600.0, poll: float = 1.0, secrets: list[str] | None = None,
                    by: str | None = None, cause: str | None = None) -> tuple[SubmitResult, dict[str, Any]]:
    """The whole submit in this process: launch (or find the driver that is there), wait until it runs."""
    submitted = submit(home, submission, launcher, by=by, cause=cause)
    event = wait(lambda: look_started(home, submitted, min_batches), timeout, poll)
    return submitted, conclude_start(home, submitted, event, secrets)


def _running_version(home: JobHome, status: Mapping[str, Any] | StatusDocument | None) -> str | None:
    """The version that runs: the status's when it names one, else job.json's (the runtime does not write
    app_version into status.json; job.json's ``version`` is the running job's)."""
    document = StatusDocument.of(status)
    version = (document.app_version if document else None) or home.spec().get("version")
    return None if version is None else str(version)


def log_tail(path: str | None, secrets: list[str] | None = None, max_chars: int = 4000) -> str:
    """The end of a local driver log, secret values masked ('' when there is none)."""
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as handle:
        handle.seek(max(0, os.path.getsize(path) - max_chars))
        text = handle.read().decode("utf-8", errors="replace")
    return redact_text(text, secrets or [])
