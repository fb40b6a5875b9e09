"""The lifecycle from a terminal: submit, stop, upgrade, the watchdog's pass and the warm standby.

Each command translates its options into an ``ops`` call and its result into text: the decisions, the job
lock and the history records are the operations' own, the same as the Airflow operators'. Drivers are
started with ``spark-submit`` directly (``ops.spark_submit.SparkSubmitLauncher``).
"""

from __future__ import annotations

import argparse
import logging
import sys

from airflow_kafka_stream.cli.common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_REFUSED,
    emit,
    job_args,
    job_home,
    nonempty,
    point_at_log,
)
from airflow_kafka_stream.cli.flags import refusal_text
from airflow_kafka_stream.cli.launching import (
    add_kafka_args,
    add_launch_args,
    kafka_settings,
    launcher_from,
    submission_from,
)
from airflow_kafka_stream.core.redaction import secret_values
from airflow_kafka_stream.errors import InvalidInputError, WatchdogGaveUp
from airflow_kafka_stream.ops.upgrade_options import DEFAULTS as UPGRADE
from airflow_kafka_stream.ops.upgrade_options import UpgradeOptions

# Lazy imports: each command imports its ops/ and render/ modules (storage, fsspec, confluent-kafka), and watch
# its core.watchdog, so --help and the other commands start without them.


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands to the CLI."""
    p = sub.add_parser("stop", help="ask the running job to stop after its current batch, and wait")
    job_args(p, checkpoint=False, kafka=False)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the job to stop")
    p.add_argument("--savepoint", action="store_true", help="take a savepoint once stopped")
    p.add_argument("--app-version", type=nonempty, help="application version recorded in the savepoint")
    p.add_argument("--on-timeout", choices=["withdraw", "kill"], default="withdraw",
                   help="when the job has not stopped within --timeout: withdraw the request (it keeps running, "
                   "the default) or kill (cancel the running batch, which re-runs on restart, and stop for good)")

    p.add_argument("--kill-timeout", type=float, default=60.0,
                   help="with --on-timeout kill: seconds the job may take to answer the kill")
    p.set_defaults(handler=_cmd_stop)

    p = sub.add_parser("submit", help="start the job's driver (detached) unless this version runs; wait until "
                                      "it commits its first batch")
    job_args(p, checkpoint=False, kafka=False)
    add_kafka_args(p)
    add_launch_args(p)
    p.add_argument("--min-batches", type=int, default=1, help="batches the new run must commit (0: RUNNING is enough)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for them")
    p.add_argument("--no-wait", action="store_true", help="return once the driver is launched")
    p.add_argument("--hot-standby", action=argparse.BooleanOptionalAction, default=None,
                   help="keep a hot standby of the running version beside the job: it takes the job over within "
                        "seconds when the driver dies (default: as the job had it; --no-hot-standby ends it)")
    p.add_argument("--from-submission", action="store_true",
                   help="start --app-version exactly as it was last submitted to this job home (application, "
                        "arguments, Spark settings): a restart after a stop, or a rollback by hand")
    p.set_defaults(handler=_cmd_submit)

    p = sub.add_parser("upgrade", help="upgrade the job to a new version: warm standby, stop with a savepoint, "
                                       "health gate, rollback on failure")
    job_args(p, checkpoint=False, kafka=False)
    add_kafka_args(p)
    add_launch_args(p)
    p.add_argument("--no-standby", dest="standby", action="store_false",
                   help="start the new version cold, after the old one stopped (default: a warm standby)")
    p.add_argument("--drop-state", action="store_true",
                   help="start the new version from the savepoint's offsets alone (an incompatible query change)")
    p.add_argument("--allow-sink-batch-log", action="store_true",
                   help="with --drop-state: proceed although the sink keeps a batch log keyed by batch id")
    p.add_argument("--no-rollback", dest="rollback", action="store_false",
                   help="leave a failed new version as it is (default: roll back to the previous version)")
    p.add_argument("--takeover-stopped", action="store_true",
                   help="let the standby take over a job that stopped by itself before the upgrade stopped it")
    p.add_argument("--health-batches", type=int, default=UPGRADE.health_batches,
                   help="batches the new version must commit")
    p.add_argument("--health-window", type=float, default=UPGRADE.health_window_seconds,
                   help="seconds its lag must not grow after those batches")
    p.add_argument("--health-startup", type=float, default=UPGRADE.health_startup_seconds,
                   help="seconds the new version may take to commit its first batch")
    p.add_argument("--health-timeout", type=float, default=UPGRADE.health_timeout_seconds,
                   help="seconds the whole health gate may take")
    p.add_argument("--stop-timeout", type=float, default=UPGRADE.stop_timeout_seconds,
                   help="seconds the old version may take to drain")
    p.add_argument("--start-timeout", type=float, default=UPGRADE.start_timeout_seconds,
                   help="seconds a version may take to start")
    p.add_argument("--standby-timeout", type=float, default=UPGRADE.standby_ready_timeout_seconds,
                   help="seconds the standby may take to report READY (its rehearsal included)")
    p.add_argument("--rehearsal-timeout", type=float, default=UPGRADE.rehearsal_timeout_seconds,
                   help="seconds the standby's rehearsal of the new query may run before it is ended")
    p.add_argument("--check", action="store_true",
                   help="only rehearse the new version on the job's state and report compatible, needs drop_state "
                        "or fails; changes nothing (exit 0 when the upgrade as asked would go on, else 2)")
    p.set_defaults(handler=_cmd_upgrade)

    p = sub.add_parser("watchdog", help="one watchdog pass: restart a dead or stuck job within the failure-rate "
                                        "limit, never a stopped one (run it from cron)")
    job_args(p, checkpoint=False, kafka=False)
    add_kafka_args(p)
    p.add_argument("--master", type=nonempty, help="the Spark master to restart on (default: the recorded one)")
    p.add_argument("--spark-submit", type=nonempty, help="the spark-submit program (default: the one on PATH)")
    p.add_argument("--stuck-after", type=float, default=600.0,
                   help="seconds without a committed batch, while records wait, that count as stuck")
    p.add_argument("--max-restarts", type=int, default=3, help="restarts allowed within --window")
    p.add_argument("--window", type=float, default=3600.0, help="seconds of the restart limit's window")
    p.add_argument("--backoff", type=float, default=30.0,
                   help="seconds after a restart before the next one (doubles with each)")
    p.add_argument("--max-heartbeat-age", type=float, default=30.0,
                   help="seconds without a heartbeat after which a running job counts as dead")
    p.set_defaults(handler=_cmd_watchdog)

    p = sub.add_parser("standby", help="launch a warm standby of a new version beside the running job, or end "
                                       "one whose upgrade was abandoned")
    p.add_argument("action", choices=["launch", "end"])
    job_args(p, checkpoint=False, kafka=False)
    add_kafka_args(p)
    add_launch_args(p, version_required=False)
    p.add_argument("--timeout", type=float, default=600.0, help="launch: seconds the standby may take to be READY")
    p.add_argument("--drop-state", action="store_true",
                   help="launch: the upgrade will drop the state, so the standby rehearses from the offsets alone")
    p.add_argument("--rehearsal-timeout", type=float, default=UPGRADE.rehearsal_timeout_seconds,
                   help="launch: seconds the standby's rehearsal of the new query may run")
    p.add_argument("--reason", type=nonempty, default="ended by an operator",
                   help="end: why, recorded in the history and the standby's record")
    p.set_defaults(handler=_cmd_standby)

def _cmd_stop(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import stop
    from airflow_kafka_stream.render.job import stop_text

    result = stop.stop_job(job_home(args), timeout=args.timeout, savepoint=args.savepoint,
                           app_version=args.app_version, on_timeout=args.on_timeout, kill_timeout=args.kill_timeout)
    emit(args, result.to_dict(), stop_text(result))
    return EXIT_OK


def _cmd_standby(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.standby import end_live_standby

    if args.action == "launch":
        return _standby_launch(args)
    ended = end_live_standby(job_home(args), args.reason)
    emit(args, ended.to_dict(), f"ended the standby of version {ended.app_version} (pid {ended.pid} on "
                                 f"{ended.host}); the running job was not touched")
    return EXIT_OK


def _standby_launch(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.standby import launch_standby, wait_ready

    if not args.app_version:
        raise InvalidInputError("standby launch needs the version to start", setting="app_version")
    home = job_home(args)
    home.require()
    kafka = kafka_settings(args, home)
    handle = launch_standby(home, submission_from(args, home, kafka, new_version=True),
                            launcher_from(args, home, kafka),
                            rehearse={"drop_state": args.drop_state, "timeout_seconds": args.rehearsal_timeout})
    wait_ready(home, handle, args.timeout, 0.5, secret_values(kafka))
    emit(args, handle.to_dict(), f"standby of version {handle.app_version} is READY (pid {handle.pid}, log "
                                 f"{handle.driver_log}); `upgrade --app-version {handle.app_version}` hands the job "
                                 "over to it")
    return EXIT_OK


def _cmd_submit(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import hot_standby, submit

    home = job_home(args)
    kafka = kafka_settings(args, home)
    submission = _recorded(home, args) if args.from_submission else submission_from(args, home, kafka)
    launcher = launcher_from(args, home, kafka)

    def record_wish() -> None:  # once the submit was accepted (a refused one changes nothing)
        hot_standby.set_wish(home, args.hot_standby)
        if args.hot_standby is False:
            hot_standby.end_hot_standby(home, "the job was submitted with --no-hot-standby")

    if args.no_wait:
        result = submit.submit(home, submission, launcher)
        record_wish()
        emit(args, result.to_dict(), _submitted_text(result))
        return EXIT_OK
    result, running = submit.submit_and_wait(home, submission, launcher, min_batches=args.min_batches,
                                             timeout=args.timeout, secrets=secret_values(kafka))
    record_wish()  # the driver has written job.json by now: the two writes cannot cross
    standby = hot_standby.keep_hot_standby(home, launcher)
    emit(args, {**result.to_dict(), "job": running, "hot_standby": standby.to_dict() if standby else None},
         _submitted_text(result) + f"\nversion {result.app_version} is RUNNING: generation "
         f"{running.get('generation')}, last batch {running.get('last_batch_id')}"
         + (f"\nhot standby launched: pid {standby.pid}, log {standby.driver_log}" if standby else ""))
    return EXIT_OK


def _recorded(home, args: argparse.Namespace):
    """``--from-submission``: the version's recorded submission; options that describe another are refused."""
    from airflow_kafka_stream.ops.submit import recorded_submission

    given = [flag for flag, value in (("--application", args.application), ("--topic", args.topic),
                                      ("--group", args.group), ("--output", args.output), ("--conf", args.conf),
                                      ("--source", getattr(args, "source", None)),
                                      ("--output-asset", args.output_asset), ("--output-topic", args.output_topic),
                                      ("--skip-replays", args.skip_replays),
                                      ("application arguments", args.application_args)) if value]
    if given:
        raise InvalidInputError(f"--from-submission starts the recorded submission as it was; drop "
                                f"{', '.join(given)}, or submit without --from-submission", setting="application")
    return recorded_submission(home, args.app_version)


def _submitted_text(result) -> str:
    if result.action == "launched":
        return (f"launched version {result.app_version}: pid {result.pid} on {result.host}"
                + (f", application {result.application_id}" if result.application_id else "")
                + f", log {result.driver_log}")
    return f"version {result.app_version}: {result.reason}"


def _cmd_upgrade(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.upgrade import upgrade

    home = job_home(args)
    home.require()
    kafka = kafka_settings(args, home)
    options = UpgradeOptions(
        standby=args.standby, drop_state=args.drop_state, allow_sink_batch_log=args.allow_sink_batch_log,
        rollback=args.rollback, takeover_stopped=args.takeover_stopped, health_batches=args.health_batches,
        health_window_seconds=args.health_window, health_startup_seconds=args.health_startup,
        health_timeout_seconds=args.health_timeout, stop_timeout_seconds=args.stop_timeout,
        start_timeout_seconds=args.start_timeout, standby_ready_timeout_seconds=args.standby_timeout,
        rehearsal_timeout_seconds=args.rehearsal_timeout)
    say = (lambda line: print(line, file=sys.stderr)) if not args.json else logging.getLogger(__name__).info
    if args.check:
        return _check(args, home, kafka, options, say)
    outcome = upgrade(home, submission_from(args, home, kafka, new_version=True),
                      launcher_from(args, home, kafka), kafka, options, secrets=secret_values(kafka), say=say)
    rehearsal = outcome.rehearsal or {}
    emit(args, outcome.to_dict(), f"upgraded {home.url} from version {outcome.previous_version} to "
                                  f"{outcome.version}: {outcome.health} (savepoint {outcome.savepoint})"
                                  + (f"\nrehearsed before the stop: {rehearsal.get('verdict')}: {rehearsal.get('reason')}"
                                     if rehearsal else ""))
    return EXIT_OK


def _check(args: argparse.Namespace, home, kafka, options, say) -> int:
    from airflow_kafka_stream.ops.upgrade_check import check_upgrade

    found = check_upgrade(home, submission_from(args, home, kafka, new_version=True),
                          launcher_from(args, home, kafka), options, secrets=secret_values(kafka), say=say)
    words, settings = found.way_out
    emit(args, found.to_dict(), f"version {found.app_version}: {found.verdict}: {found.reason}"
                                + ("" if found.would_upgrade else f"\nnothing was changed; {refusal_text(words, settings)}"))
    point_at_log(found.log, found.log_tail, args.verbose)
    return EXIT_OK if found.would_upgrade else EXIT_REFUSED


def _cmd_watchdog(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.core.watchdog import Policy
    from airflow_kafka_stream.ops.watchdog import watch

    home = job_home(args)
    home.require()
    kafka = kafka_settings(args, home)
    try:
        policy = Policy(args.stuck_after, args.max_restarts, args.window, args.backoff, args.max_heartbeat_age)
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from None
    try:
        result = watch(home, kafka, policy, launcher_from(args, home, kafka))
    except WatchdogGaveUp as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    restarted = result.restarted
    emit(args, result.to_dict(), f"{result.action}: {result.reason}"
         + (f" (lag {result.lag})" if result.lag is not None else "")
         + (f"\nrestarted version {restarted.app_version}: pid {restarted.pid}, log {restarted.driver_log}"
            if restarted is not None and restarted.action == "launched" else ""))
    return EXIT_OK
