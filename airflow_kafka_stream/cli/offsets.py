"""The offset reset: a plan by default, applied to checkpoint and group together with --execute."""

from __future__ import annotations

import argparse

from airflow_kafka_stream.cli.common import EXIT_OK, EXIT_PROBLEMS, context, emit, job_args, nonempty, sink_args


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands to the CLI."""
    p = sub.add_parser("reset", help="plan (default) or execute an offset reset of checkpoint and group together")
    job_args(p)
    strategy = p.add_mutually_exclusive_group(required=True)
    strategy.add_argument("--to-current", action="store_true", help="the checkpoint's position (aligns the group)")
    strategy.add_argument("--to-offset", type=nonempty, help="an offset for every partition in scope, or topic:partition=offset,...")
    strategy.add_argument("--to-datetime", type=nonempty, help="ISO 8601 time with a zone, e.g. 2026-11-22T10:00:00+01:00")
    strategy.add_argument("--to-earliest", action="store_true", help="the low watermark")
    strategy.add_argument("--to-latest", action="store_true", help="the high watermark")
    strategy.add_argument("--shift-by", type=int, help="move by N (negative goes back)")
    strategy.add_argument("--by-duration", type=nonempty, help="ISO 8601 duration back from now, e.g. PT1H")
    strategy.add_argument("--from-file", type=nonempty, help="CSV topic,partition,offset (as written by --export)")
    strategy.add_argument("--to-savepoint", type=nonempty, help="the offsets recorded in a savepoint of this job")
    p.add_argument("--topic", action="append", default=[], type=nonempty, help="scope: TOPIC or TOPIC:0,1 (repeatable)")
    p.add_argument("--timezone", type=nonempty, help="zone for a --to-datetime given without one, e.g. Europe/Berlin")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="apply the plan to checkpoint and group")
    p.add_argument("--export", metavar="FILE", type=nonempty, help="write the plan as CSV (kafka-consumer-groups.sh format)")
    p.add_argument("--strict", action="store_true", help="refuse targets outside [low, high] instead of clamping")
    p.add_argument("--drop-state", action="store_true",
                   help="start a new checkpoint generation at the targets, dropping operator state")
    sink_args(p)
    p.add_argument("--allow-sink-batch-log", action="store_true",
                   help="with --drop-state: proceed although the sink keeps a batch log keyed by batch id")
    p.set_defaults(handler=_cmd_reset)


def _cmd_reset(args: argparse.Namespace) -> int:
    from airflow_kafka_stream import cli_render
    from airflow_kafka_stream.ops import reset

    ctx = context(args)
    request = _reset_request(args)
    if not args.execute:
        plan = reset.plan(ctx, request)
        if args.export:
            reset.export_csv(plan, args.export)
        emit(args, plan.to_dict(), plan.to_table() + "\n\nDry run: nothing changed. "
              "Run again with --execute to apply this plan.")
        return EXIT_OK
    outcome = reset.execute(ctx, request, drop_state=args.drop_state,
                            allow_sink_batch_log=args.allow_sink_batch_log, export=args.export)
    emit(args, outcome.to_dict(), cli_render.reset_outcome_text(outcome))
    return EXIT_OK if outcome.verified else EXIT_PROBLEMS


def _reset_request(args: argparse.Namespace):
    from airflow_kafka_stream.errors import InvalidInputError
    from airflow_kafka_stream.ops.reset import ResetRequest

    for attr, name in _STRATEGY_FLAGS.items():
        value = getattr(args, attr, None)
        if value is not None and value is not False:
            return ResetRequest(name, None if value is True else str(value), list(args.topic or []),
                                args.timezone, bool(args.strict))
    raise InvalidInputError("choose a reset strategy, e.g. --to-current or --to-datetime 2026-11-22T10:00:00Z")


#: reset's strategy flags -> strategy names understood by core.reset_plan.parse_strategy.
_STRATEGY_FLAGS = {
    "to_current": "to-current", "to_offset": "to-offset", "to_datetime": "to-datetime",
    "to_earliest": "to-earliest", "to_latest": "to-latest", "shift_by": "shift-by",
    "by_duration": "by-duration", "from_file": "from-file", "to_savepoint": "to-savepoint",
}
