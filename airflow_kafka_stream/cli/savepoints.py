"""Savepoint commands (create, list, show, validate, delete, prune) and restore."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_kafka_stream.cli.common import EXIT_OK, Parser, context, emit, job_args, job_home, nonempty, sink_args

# Lazy imports: ops.savepoints and render.savepoints (checkpoint, storage, fsspec) wait for their commands, so
# --help and the other commands start without them.

_SAVEPOINT_ACTIONS = {
    "create": "take a savepoint of the job's last committed batch: live while it runs (it keeps running), "
              "else of the stopped job",
    "list": "list the job's savepoints",
    "show": "print a savepoint's manifest",
    "validate": "check every file of a savepoint against its manifest's checksums",
    "delete": "delete a savepoint",
    "prune": "delete old savepoints, keeping the newest (--keep-last N, --keep-within DURATION)",
}

def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands to the CLI."""
    p = sub.add_parser("savepoint", help="create, list, show, validate, delete or prune savepoints")
    # One parser per action, so the id may come before or after the options (`show --job-home H ID`).
    actions = p.add_subparsers(dest="action", required=True, parser_class=Parser, metavar="ACTION")
    for name, summary in _SAVEPOINT_ACTIONS.items():
        a = actions.add_parser(name, help=summary, description=summary)
        if name in ("show", "validate", "delete"):
            a.add_argument("savepoint_id", type=nonempty, help="the savepoint's id (see `savepoint list`)")
        job_args(a, checkpoint=False, kafka=False)
        if name == "create":
            a.add_argument("--app-version", type=nonempty, help="application version recorded in the new savepoint")
        if name == "prune":
            a.add_argument("--keep-last", type=int, help="keep the newest N")
            a.add_argument("--keep-within", type=nonempty,
                           help="keep those younger than this ISO 8601 duration, e.g. P7D")
        a.set_defaults(handler=_cmd_savepoint)

    p = sub.add_parser("restore", help="start a new checkpoint generation from a savepoint")
    job_args(p, checkpoint=False)
    p.add_argument("--savepoint", required=True, type=nonempty, help="the savepoint id, or latest (the newest)")
    p.add_argument("--drop-state", action="store_true",
                   help="seed a fresh checkpoint with the savepoint's offsets only (allowNonRestoredState)")
    sink_args(p)
    p.add_argument("--allow-sink-batch-log", action="store_true",
                   help="proceed although the sink keeps a batch log keyed by batch id")
    p.set_defaults(handler=_cmd_restore)


def _cmd_savepoint(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import savepoints
    from airflow_kafka_stream.render import savepoints as text_of

    home = job_home(args)
    sp_id = getattr(args, "savepoint_id", None)
    data: Any
    if args.action == "create":
        made = savepoints.create(home, app_version=args.app_version)
        data, text = made.to_dict(), text_of.created_text(made)
    elif args.action == "list":
        found = savepoints.list_all(home)
        data, text = [info.to_dict() for info in found], text_of.savepoint_table(found)
    elif args.action == "show":
        data = savepoints.show(home, sp_id).to_dict()
        text = text_of.fields_text(data)
    elif args.action == "validate":
        checked = savepoints.validate(home, sp_id)
        data, text = checked.to_dict(), text_of.validated_text(checked)
    elif args.action == "delete":
        deleted = savepoints.delete(home, sp_id)
        data, text = deleted.to_dict(), text_of.deleted_text(deleted.deleted)
    else:
        pruned = savepoints.prune(home, keep_last=args.keep_last, max_age=args.keep_within)
        data, text = pruned.to_dict(), text_of.prune_text(pruned)
    emit(args, data, text)
    return EXIT_OK


def _cmd_restore(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.ops import savepoints
    from airflow_kafka_stream.render.savepoints import restore_text

    home = job_home(args)
    # The cluster and group (job.json's, or the flags'): a restore is refused while another consumer uses the group.
    ctx = context(args)
    result = savepoints.restore(home, savepoints.resolve_id(home, args.savepoint), drop_state=args.drop_state,
                                sink_path=args.sink_path, sink_kind=args.sink_kind,
                                allow_sink_batch_log=args.allow_sink_batch_log,
                                kafka_config=ctx.kafka_config if ctx.kafka_config.get("bootstrap.servers") else None,
                                group=ctx.group)
    emit(args, result.to_dict(), restore_text(result))
    return EXIT_OK
