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
import logging
import sys
from collections.abc import Sequence

from airflow_kafka_stream.cli import environment, inspection, lifecycle, offsets, savepoints
from airflow_kafka_stream.cli.common import EXIT_OK, EXIT_PROBLEMS, EXIT_REFUSED, Parser, point_at_log
from airflow_kafka_stream.cli.flags import refusal_text
from airflow_kafka_stream.errors import OperationIncompleteError, StreamError

__all__ = ["EXIT_OK", "EXIT_PROBLEMS", "EXIT_REFUSED", "build_parser", "main", "parse"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="airflow-kafka-stream", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for commands in (inspection, offsets, lifecycle, savepoints, environment):
        commands.register(sub)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, whose application arguments are only what follows ``--``: a word before it that no
    option takes (the ``3`` of ``--frobnicate 3``) is refused with the unknown options, never passed on."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    given, application = (words[:words.index("--")], words[words.index("--") + 1:]) if "--" in words else (words, [])
    args, unknown = parser.parse_known_args(given)
    if not hasattr(args, "application_args"):
        if "--" in words:
            unknown.append("-- " + " ".join(application))
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        return args
    if unknown or args.application_args:
        parser.error(f"unrecognized arguments: {' '.join([*unknown, *args.application_args])} (arguments of "
                     "--application go after --)")
    args.application_args = application
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return args.handler(args)
    except OperationIncompleteError as exc:
        print(f"error: {exc.reason}", file=sys.stderr)
        point_at_log(exc.log, exc.log_tail, args.verbose)
        return EXIT_PROBLEMS
    except StreamError as exc:
        print(f"error: {refusal_text(exc.reason, exc.settings)}", file=sys.stderr)
        point_at_log(exc.log, exc.log_tail, args.verbose)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
