"""Commands that look at a job: status, checkpoint (position, state, fsck, repair), verify, history, unlock."""

from __future__ import annotations

import argparse

from airflow_kafka_stream.cli.common import EXIT_OK, EXIT_PROBLEMS, context, emit, job_args, job_home, nonempty

# Lazy imports: each command imports its ops/ and render/ modules (storage, fsspec, confluent-kafka; 100 ms
# and more), so --help and the other commands start without them.


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands to the CLI."""
    p = sub.add_parser("status", help="what the job is doing now: state, heartbeat, last batch, group commits "
                                      "(exit 0 while it runs, 1 when it does not)")
    job_args(p, checkpoint=False, kafka=False)
    p.set_defaults(handler=_cmd_status)

    p = sub.add_parser("checkpoint", help="show a checkpoint's position or what its state holds (stateful "
                                          "operators, stores, partitions, schemas), check it (fsck), or repair "
                                          "an interrupted reset")
    p.add_argument("action", nargs="?", choices=["position", "state", "fsck", "repair"], default="position")
    job_args(p, kafka=False)
    p.set_defaults(handler=_cmd_checkpoint)

    p = sub.add_parser("verify", help="compare the group's committed offsets with the checkpoint, per partition")
    job_args(p)
    p.add_argument("--stall-threshold", default="PT10M", type=nonempty,
                   help="ISO 8601 duration without a committed batch, while lag > 0, that counts as STALLED")
    p.add_argument("--window", default="PT10M", type=nonempty,
                   help="ISO 8601 duration of the window rules (REWIND, STOP, WARN) over the group's recent looks; "
                        "REWIND and STOP exit 1, WARN is a warning")
    p.set_defaults(handler=_cmd_verify)

    p = sub.add_parser("history", help="print the job's operation history")
    job_args(p, checkpoint=False, kafka=False)
    p.set_defaults(handler=_cmd_history)

    p = sub.add_parser("unlock", help="release the job lock left behind by an operation whose process died")
    job_args(p, checkpoint=False, kafka=False)
    p.set_defaults(handler=_cmd_unlock)


def _cmd_status(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.inspect import job_status
    from airflow_kafka_stream.render.job import status_text

    status = job_status(job_home(args))
    emit(args, status.to_dict(), status_text(status))
    return EXIT_OK if status.running else EXIT_PROBLEMS


def _cmd_checkpoint(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import inspect
    from airflow_kafka_stream.render.checkpoint import fsck_text, position_text, repair_text, state_text

    ctx = context(args)
    if args.action == "state":
        state = inspect.state(ctx)
        emit(args, state.to_dict(), state_text(state))
        return EXIT_PROBLEMS if state.problems else EXIT_OK
    if args.action == "repair":
        result = inspect.repair(ctx)
        emit(args, result.to_dict(), repair_text(result))
        return EXIT_OK
    if args.action == "fsck":
        report = inspect.fsck(ctx)
        emit(args, report.to_dict(), fsck_text(report))
        return EXIT_OK if report.ok else EXIT_PROBLEMS
    seeded = inspect.unstarted(ctx)
    if seeded is not None:
        emit(args, seeded.to_dict(), seeded.describe())
        return EXIT_OK
    position = inspect.position(ctx)
    emit(args, position.to_dict(), position_text(position))
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import verify
    from airflow_kafka_stream.render.checkpoint import verify_text

    result = verify.verify(context(args), stall_threshold=args.stall_threshold, window=args.window)
    emit(args, result.to_dict(), verify_text(result))
    return result.exit_code


def _cmd_history(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.operation import history
    from airflow_kafka_stream.render.job import history_text

    found = history(job_home(args))
    emit(args, found.records(), history_text(found))
    return EXIT_OK


def _cmd_unlock(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.operation import unlock
    from airflow_kafka_stream.render.job import unlock_text

    result = unlock(job_home(args))
    emit(args, result.to_dict(), unlock_text(result))
    return EXIT_OK
