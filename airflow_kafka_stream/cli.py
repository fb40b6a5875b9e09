"""`airflow-kafka-stream`: the control plane from a terminal.

The commands mirror what the Airflow operators do and follow the habits of
Kafka's `kafka-consumer-groups.sh`: reset is a dry run unless told
`--execute`, plans can be exported as CSV, and client settings (including
secrets) come from a properties file given with `--command-config`, never
from arguments.

Exit codes: 0 success; 1 problems found (verify, fsck), or an operation that
changed something and could not finish (the message says how to finish); 2
the operation was refused (bad input, job running, lock held, broker
unreachable) and nothing was changed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from airflow_kafka_stream.errors import OperationIncompleteError, StreamError

EXIT_OK, EXIT_PROBLEMS, EXIT_REFUSED = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors, which matches our 'refused' code; keep messages short."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_REFUSED, f"{self.prog}: error: {message}\n")


def _job_args(p: argparse.ArgumentParser, checkpoint: bool = True, kafka: bool = True) -> None:
    p.add_argument("--job-home", type=_text, help="the job's home directory (path or fsspec URL)")
    if checkpoint:
        p.add_argument("--checkpoint", type=_text,
                       help="a checkpoint directory, instead of the job home's current one")
    p.add_argument("--storage-options", type=_json_object, default={},
                   help="fsspec storage options as JSON, e.g. '{\"client_kwargs\": {\"endpoint_url\": ...}}'")
    if kafka:
        p.add_argument("--bootstrap-server", type=_text,
                       help="Kafka brokers (default: job.json's kafka.bootstrap.servers)")
        p.add_argument("--group", type=_text, help="consumer group (default: job.json's group)")
        p.add_argument("--command-config", type=_text, help="client properties file (security settings, secrets)")
    p.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")


def _text(value: str) -> str:
    """A string option's value: an empty one is a mistake (an unset variable), never "not given"."""
    if not value.strip():
        raise argparse.ArgumentTypeError("is empty; give a value, or leave the option out")
    return value


def _sink_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sink-kind", choices=["file", "idempotent", "none"],
                   help="what the job writes to (default: job.json's sink): file = Spark's file sink with a "
                        "_spark_metadata batch log; idempotent = output replaced per batch id (foreachBatch); "
                        "none = no sink log to keep")
    # An empty --sink-path is refused by resolve_sink, whose message names the --sink-kind way out.
    p.add_argument("--sink-path", help="the sink's output directory; alone it names a file sink")


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg}); pass a JSON object") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


_SAVEPOINT_ACTIONS = {
    "create": "take a savepoint of the stopped job",
    "list": "list the job's savepoints",
    "show": "print a savepoint's manifest",
    "validate": "check every file of a savepoint against its manifest's checksums",
    "delete": "delete a savepoint",
    "prune": "delete old savepoints, keeping the newest (--keep-last N, --keep-within DURATION)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="airflow-kafka-stream", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("status", help="what the job is doing now: state, heartbeat, last batch, group commits "
                                      "(exit 0 while it runs, 1 when it does not)")
    _job_args(p, checkpoint=False, kafka=False)
    p.set_defaults(handler=_cmd_status)

    p = sub.add_parser("checkpoint", help="show a checkpoint's position, check it (fsck), or repair an "
                                          "interrupted reset")
    p.add_argument("action", nargs="?", choices=["position", "fsck", "repair"], default="position")
    _job_args(p, kafka=False)
    p.set_defaults(handler=_cmd_checkpoint)

    p = sub.add_parser("verify", help="compare the group's committed offsets with the checkpoint, per partition")
    _job_args(p)
    p.add_argument("--stall-threshold", default="PT10M", type=_text,
                   help="ISO 8601 duration without a committed batch, while lag > 0, that counts as STALLED")
    p.set_defaults(handler=_cmd_verify)

    p = sub.add_parser("reset", help="plan (default) or execute an offset reset of checkpoint and group together")
    _job_args(p)
    strategy = p.add_mutually_exclusive_group(required=True)
    strategy.add_argument("--to-current", action="store_true", help="the checkpoint's position (aligns the group)")
    strategy.add_argument("--to-offset", type=_text, help="an offset for every partition in scope, or topic:partition=offset,...")
    strategy.add_argument("--to-datetime", type=_text, help="ISO 8601 time with a zone, e.g. 2026-11-22T10:00:00+01:00")
    strategy.add_argument("--to-earliest", action="store_true", help="the low watermark")
    strategy.add_argument("--to-latest", action="store_true", help="the high watermark")
    strategy.add_argument("--shift-by", type=int, help="move by N (negative goes back)")
    strategy.add_argument("--by-duration", type=_text, help="ISO 8601 duration back from now, e.g. PT1H")
    strategy.add_argument("--from-file", type=_text, help="CSV topic,partition,offset (as written by --export)")
    strategy.add_argument("--to-savepoint", type=_text, help="the offsets recorded in a savepoint of this job")
    p.add_argument("--topic", action="append", default=[], type=_text, help="scope: TOPIC or TOPIC:0,1 (repeatable)")
    p.add_argument("--timezone", type=_text, help="zone for a --to-datetime given without one, e.g. Europe/Berlin")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="apply the plan to checkpoint and group")
    p.add_argument("--export", metavar="FILE", type=_text, help="write the plan as CSV (kafka-consumer-groups.sh format)")
    p.add_argument("--strict", action="store_true", help="refuse targets outside [low, high] instead of clamping")
    p.add_argument("--drop-state", action="store_true",
                   help="start a new checkpoint generation at the targets, dropping operator state")
    _sink_args(p)
    p.add_argument("--allow-sink-batch-log", action="store_true",
                   help="with --drop-state: proceed although the sink keeps a batch log keyed by batch id")
    p.set_defaults(handler=_cmd_reset)

    p = sub.add_parser("stop", help="ask the running job to stop after its current batch, and wait")
    _job_args(p, checkpoint=False, kafka=False)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the job to stop")
    p.add_argument("--savepoint", action="store_true", help="take a savepoint once stopped")
    p.add_argument("--app-version", type=_text, help="application version recorded in the savepoint")
    p.add_argument("--on-timeout", choices=["withdraw", "kill"], default="withdraw",
                   help="when the job has not stopped within --timeout: withdraw the request (it keeps running, "
                   "the default) or kill (cancel the running batch, which re-runs on restart, and stop for good)")
    p.set_defaults(handler=_cmd_stop)

    p = sub.add_parser("savepoint", help="create, list, show, validate, delete or prune savepoints")
    # One parser per action, so the id may come before or after the options (`show --job-home H ID`).
    actions = p.add_subparsers(dest="action", required=True, parser_class=_Parser, metavar="ACTION")
    for name, text in _SAVEPOINT_ACTIONS.items():
        a = actions.add_parser(name, help=text, description=text)
        if name in ("show", "validate", "delete"):
            a.add_argument("savepoint_id", type=_text, help="the savepoint's id (see `savepoint list`)")
        _job_args(a, checkpoint=False, kafka=False)
        if name == "create":
            a.add_argument("--app-version", type=_text, help="application version recorded in the new savepoint")
        if name == "prune":
            a.add_argument("--keep-last", type=int, help="keep the newest N")
            a.add_argument("--keep-within", type=_text,
                           help="keep those younger than this ISO 8601 duration, e.g. P7D")
        a.set_defaults(handler=_cmd_savepoint)

    p = sub.add_parser("restore", help="start a new checkpoint generation from a savepoint")
    _job_args(p, checkpoint=False, kafka=False)
    p.add_argument("--savepoint", required=True, type=_text, help="the savepoint id")
    p.add_argument("--drop-state", action="store_true",
                   help="seed a fresh checkpoint with the savepoint's offsets only (allowNonRestoredState)")
    _sink_args(p)
    p.add_argument("--allow-sink-batch-log", action="store_true",
                   help="proceed although the sink keeps a batch log keyed by batch id")
    p.set_defaults(handler=_cmd_restore)

    p = sub.add_parser("standby", help="end an upgrade's live warm standby (its upgrade was abandoned)")
    p.add_argument("action", choices=["end"])
    _job_args(p, checkpoint=False, kafka=False)
    p.add_argument("--reason", type=_text, default="ended by an operator",
                   help="why, recorded in the history and the standby's record")
    p.set_defaults(handler=_cmd_standby)

    p = sub.add_parser("history", help="print the job's operation history")
    _job_args(p, checkpoint=False, kafka=False)
    p.set_defaults(handler=_cmd_history)

    p = sub.add_parser("unlock", help="release the job lock left behind by an operation whose process died")
    _job_args(p, checkpoint=False, kafka=False)
    p.set_defaults(handler=_cmd_unlock)

    p = sub.add_parser("pack-env", help="pack this environment for a cluster's executors (spark-submit --archives)")
    p.add_argument("--cache-dir", type=_text, help="where archives are kept (default ~/.cache/airflow-kafka-stream/envs)")
    p.add_argument("--with", dest="extra", action="append", default=[], type=_text,
                   help="another installed distribution your job runs on executors (repeat)")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.set_defaults(handler=_cmd_pack_env)
    return parser


def _context(args: argparse.Namespace):
    from airflow_kafka_stream.ops.context import build_context, read_properties

    client = read_properties(args.command_config) if getattr(args, "command_config", None) else {}
    return build_context(
        job_home=args.job_home,
        checkpoint=getattr(args, "checkpoint", None),
        bootstrap_servers=getattr(args, "bootstrap_server", None),
        group=getattr(args, "group", None),
        client_config=client,
        storage_options=args.storage_options,
        sink_path=getattr(args, "sink_path", None),
        uses_kafka=hasattr(args, "command_config"),
        sink_kind=getattr(args, "sink_kind", None),
    )


def _home(args: argparse.Namespace):
    from airflow_kafka_stream.errors import InvalidInputError
    from airflow_kafka_stream.storage.jobhome import JobHome

    if not args.job_home:
        raise InvalidInputError(f"{args.command} needs the job's home directory", setting="job_home")
    return JobHome(args.job_home, args.storage_options)


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(text)


def _cmd_status(args: argparse.Namespace) -> int:
    from airflow_kafka_stream import cli_render
    from airflow_kafka_stream.ops.inspect import job_status

    status = job_status(_home(args))
    _emit(args, status.to_dict(), cli_render.status_text(status))
    return EXIT_OK if status.running else EXIT_PROBLEMS


def _cmd_checkpoint(args: argparse.Namespace) -> int:
    from airflow_kafka_stream import cli_render
    from airflow_kafka_stream.ops import inspect

    ctx = _context(args)
    if args.action == "repair":
        result = inspect.repair(ctx)
        _emit(args, result.to_dict(), cli_render.repair_text(result))
        return EXIT_OK
    if args.action == "fsck":
        report = inspect.fsck(ctx)
        _emit(args, report.to_dict(), report.render())
        return EXIT_OK if report.ok else EXIT_PROBLEMS
    seeded = inspect.unstarted(ctx)
    if seeded is not None:
        _emit(args, seeded.to_dict(), seeded.describe())
        return EXIT_OK
    position = inspect.position(ctx)
    _emit(args, position.to_dict(), cli_render.position_text(position))
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import verify

    result = verify.verify(_context(args), stall_threshold=args.stall_threshold)
    _emit(args, result.to_dict(), result.to_table())
    return result.exit_code


def _cmd_reset(args: argparse.Namespace) -> int:
    from airflow_kafka_stream import cli_render
    from airflow_kafka_stream.ops import reset

    ctx = _context(args)
    request = _reset_request(args)
    if not args.execute:
        plan = reset.plan(ctx, request)
        if args.export:
            reset.export_csv(plan, args.export)
        _emit(args, plan.to_dict(), plan.to_table() + "\n\nDry run: nothing changed. "
              "Run again with --execute to apply this plan.")
        return EXIT_OK
    outcome = reset.execute(ctx, request, drop_state=args.drop_state,
                            allow_sink_batch_log=args.allow_sink_batch_log, export=args.export)
    _emit(args, outcome.to_dict(), cli_render.reset_outcome_text(outcome))
    return EXIT_OK if outcome.verified else EXIT_PROBLEMS


def _cmd_stop(args: argparse.Namespace) -> int:
    from airflow_kafka_stream import cli_render
    from airflow_kafka_stream.ops import stop

    result = stop.stop_job(_home(args), timeout=args.timeout, savepoint=args.savepoint,
                           app_version=args.app_version, on_timeout=args.on_timeout)
    _emit(args, result.to_dict(), cli_render.stop_text(result))
    return EXIT_OK


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


def _cmd_savepoint(args: argparse.Namespace) -> int:
    from airflow_kafka_stream import cli_render
    from airflow_kafka_stream.core.reset_plan import parse_duration
    from airflow_kafka_stream.ops import savepoints

    home = _home(args)
    sp_id = getattr(args, "savepoint_id", None)
    data: Any
    if args.action == "create":
        made = savepoints.create(home, app_version=args.app_version)
        data, text = made.to_dict(), f"created savepoint {made.id} at batch {made.batch_id}: offsets {made.offsets}"
    elif args.action == "list":
        found = savepoints.list_all(home)
        data, text = [info.to_dict() for info in found], cli_render.savepoint_table(found)
    elif args.action == "show":
        data = savepoints.show(home, sp_id).to_dict()
        text = cli_render.fields_text(data)
    elif args.action == "validate":
        checked = savepoints.validate(home, sp_id)
        data, text = checked.to_dict(), f"savepoint {checked.id}: all {checked.files} checksums match"
    elif args.action == "delete":
        data = savepoints.delete(home, sp_id).to_dict()
        text = f"deleted savepoint {data['deleted']}"
    else:
        pruned = savepoints.prune(home, keep_last=args.keep_last,
                                  max_age=parse_duration(args.keep_within, "max_age") if args.keep_within else None)
        data = pruned.to_dict()
        text = ("deleted " + ", ".join(pruned.deleted)) if pruned.deleted else "nothing to prune"
        if pruned.pinned:
            text += f" (kept while an upgrade may roll back to them: {', '.join(pruned.pinned)})"
    _emit(args, data, text)
    return EXIT_OK


def _cmd_restore(args: argparse.Namespace) -> int:
    from airflow_kafka_stream import cli_render
    from airflow_kafka_stream.ops import savepoints

    result = savepoints.restore(_home(args), args.savepoint, drop_state=args.drop_state,
                                sink_path=args.sink_path, sink_kind=args.sink_kind,
                                allow_sink_batch_log=args.allow_sink_batch_log)
    _emit(args, result.to_dict(), cli_render.restore_text(result))
    return EXIT_OK


def _cmd_standby(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.standby import end_live_standby

    ended = end_live_standby(_home(args), args.reason)
    _emit(args, ended.to_dict(), f"ended the standby of version {ended.app_version} (pid {ended.pid} on "
                                 f"{ended.host}); the running job was not touched")
    return EXIT_OK


def _cmd_history(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.operation import history

    records = history(_home(args))
    lines = [f"{r.get('started_at', '?')}  {r.get('operation', '?'):<18} {r.get('result', '?'):<8} {r.get('by', '')}"
             + (f"  {r['error']}" if r.get("error") else "") for r in records]
    _emit(args, records, "\n".join(lines) or "(no operations recorded)")
    return EXIT_OK


def _cmd_unlock(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops.operation import unlock

    held = unlock(_home(args))
    _emit(args, {"released": held}, f"released lock {held}" if held else "the job home was not locked")
    return EXIT_OK


def _cmd_pack_env(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.cluster.environment import pack_executor_environment

    archive = pack_executor_environment(args.cache_dir, args.extra)
    _emit(args, {"archive": str(archive)}, f"{archive}\nship it with: spark-submit --archives {archive}#environment "
          "--conf spark.pyspark.python=./environment/bin/python ...")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return args.handler(args)
    except OperationIncompleteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    except StreamError as exc:
        from airflow_kafka_stream.cli_render import refusal_text

        print(f"error: {refusal_text(str(exc), exc.settings)}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
