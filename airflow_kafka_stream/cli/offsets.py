"""The offset reset: a plan by default, applied to checkpoint and group together with --execute."""

from __future__ import annotations

import argparse

from airflow_kafka_stream.cli.common import EXIT_OK, EXIT_PROBLEMS, context, emit, job_args, nonempty, sink_args
from airflow_kafka_stream.cli.flags import strategy_flag
from airflow_kafka_stream.core.reset_strategy import StrategyKind, ValueKind
from airflow_kafka_stream.errors import InvalidInputError

# Lazy imports: ops.reset and render.reset (checkpoint, storage, confluent-kafka) wait for reset, so --help and
# the other commands start without them.

#: What a dry run adds to its plan: how to apply it.
DRY_RUN_TRAILER = "\n\nDry run: nothing changed. Run again with --execute to apply this plan."


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands to the CLI."""
    p = sub.add_parser("reset", help="plan (default) or execute an offset reset of checkpoint and group together")
    job_args(p)
    strategy = p.add_mutually_exclusive_group(required=True)
    for kind in StrategyKind.choices():  # one option per strategy, named as kafka-consumer-groups.sh names it
        if kind.value_kind is ValueKind.NONE:
            strategy.add_argument(strategy_flag(kind), action="store_true", help=kind.summary)
        else:
            strategy.add_argument(strategy_flag(kind), help=kind.summary,
                                  type=int if kind.value_kind is ValueKind.INTEGER else nonempty)
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
    from airflow_kafka_stream.ops import reset
    from airflow_kafka_stream.render.reset import reset_run_text

    mode = reset.ResetMode.EXECUTE if args.execute else reset.ResetMode.DRY_RUN
    run = reset.run(context(args), _reset_request(args), mode, export=args.export, drop_state=args.drop_state,
                    allow_sink_batch_log=args.allow_sink_batch_log)
    if run.outcome is None:
        emit(args, run.plan.to_dict(), reset_run_text(run) + DRY_RUN_TRAILER)
        return EXIT_OK
    emit(args, run.outcome.to_dict(), reset_run_text(run))
    return EXIT_OK if run.ok else EXIT_PROBLEMS


def _reset_request(args: argparse.Namespace):
    from airflow_kafka_stream.ops.reset import ResetRequest

    for kind in StrategyKind.choices():
        value = getattr(args, kind.value.replace("-", "_"), None)
        if value is not None and value is not False:
            return ResetRequest(kind, None if value is True else str(value), list(args.topic or []),
                                args.timezone, bool(args.strict))
    raise InvalidInputError("choose a reset strategy, e.g. --to-current or --to-datetime 2026-11-22T10:00:00Z")
