"""Commands that start, stop and hand over a job's driver."""

from __future__ import annotations

import argparse

from airflow_kafka_stream.cli.common import EXIT_OK, emit, job_args, job_home, nonempty


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
    p.set_defaults(handler=_cmd_stop)

    p = sub.add_parser("standby", help="end an upgrade's live warm standby (its upgrade was abandoned)")
    p.add_argument("action", choices=["end"])
    job_args(p, checkpoint=False, kafka=False)
    p.add_argument("--reason", type=nonempty, default="ended by an operator",
                   help="why, recorded in the history and the standby's record")
    p.set_defaults(handler=_cmd_standby)


def _cmd_stop(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import stop
    from airflow_kafka_stream.render.job import stop_text

    result = stop.stop_job(job_home(args), timeout=args.timeout, savepoint=args.savepoint,
                           app_version=args.app_version, on_timeout=args.on_timeout)
    emit(args, result.to_dict(), stop_text(result))
    return EXIT_OK


def _cmd_standby(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.standby import end_live_standby

    ended = end_live_standby(job_home(args), args.reason)
    emit(args, ended.to_dict(), f"ended the standby of version {ended.app_version} (pid {ended.pid} on "
                                 f"{ended.host}); the running job was not touched")
    return EXIT_OK
