"""What every command shares: the parser class, the job options, the context and the output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from airflow_kafka_stream.core import sink
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.properties import read_properties

# Lazy imports: ops.context and storage.jobhome (fsspec, confluent-kafka) wait for the command that uses them, so
# --help and the parser start without them.

EXIT_OK, EXIT_PROBLEMS, EXIT_REFUSED = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors, which matches our 'refused' code; keep messages short."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_REFUSED, f"{self.prog}: error: {message}\n")


def point_at_log(log: str | None, tail: str, verbose: bool) -> None:
    """After a failure's reason: where the driver log that says more is, and its end only with --verbose (a
    traceback and Spark's INFO lines would bury the reason)."""
    if not log:
        return
    if verbose and tail:
        print(f"--- end of {log} ---\n{tail}", file=sys.stderr)
    else:
        print(f"the full log: {log} (airflow-kafka-stream --verbose ... prints its end here)", file=sys.stderr)


def job_args(p: argparse.ArgumentParser, checkpoint: bool = True, kafka: bool = True) -> None:
    p.add_argument("--job-home", type=nonempty, help="the job's home directory (path or fsspec URL)")
    if checkpoint:
        p.add_argument("--checkpoint", type=nonempty,
                       help="a checkpoint directory, instead of the job home's current one")
    p.add_argument("--storage-options", type=json_object, default={},
                   help="fsspec storage options as JSON, e.g. '{\"client_kwargs\": {\"endpoint_url\": ...}}', or "
                        "@FILE to read them from a file (keep credentials there: arguments are visible in ps)")
    if kafka:
        p.add_argument("--bootstrap-server", type=nonempty,
                       help="Kafka brokers (default: job.json's kafka.bootstrap.servers)")
        p.add_argument("--group", type=nonempty, help="consumer group (default: job.json's group)")
        p.add_argument("--command-config", type=nonempty, help="client properties file (security settings, secrets)")
    p.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")


def nonempty(value: str) -> str:
    """A string option's value: an empty one is a mistake (an unset variable), never "not given"."""
    if not value.strip():
        raise argparse.ArgumentTypeError("is empty; give a value, or leave the option out")
    return value


def sink_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sink-kind", choices=[*sink.KINDS, sink.NONE],
                   help="what the job writes to (default: job.json's sink): file = Spark's file sink with a "
                        "_spark_metadata batch log; idempotent = output replaced per batch id (foreachBatch); "
                        "kafka = the transactional Kafka sink (--sink-path kafka://HOST:PORT/TOPIC); "
                        "none = no sink log to keep")
    # An empty --sink-path is refused by resolve_sink, whose message names the --sink-kind way out.
    p.add_argument("--sink-path", help="the sink's output directory; alone it names a file sink")


def json_object(text: str) -> dict:
    """A JSON object given inline, or ``@FILE``: a file holding it (for credentials, which an argument would
    show in the process list)."""
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg}); pass a JSON object") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def context(args: argparse.Namespace):
    from airflow_kafka_stream.ops.context import build_context

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


def job_home(args: argparse.Namespace):
    from airflow_kafka_stream.storage.jobhome import JobHome

    if not args.job_home:
        raise InvalidInputError(f"{args.command} needs the job's home directory", setting="job_home")
    return JobHome(args.job_home, args.storage_options)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(text)


