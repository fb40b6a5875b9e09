"""pack-env: this environment packed for a cluster's executors."""

from __future__ import annotations

import argparse

from airflow_kafka_stream.cli.common import EXIT_OK, emit, nonempty

# Lazy imports: cluster.environment (packing an environment) waits for pack-env, so --help and the other commands
# start without it.


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands to the CLI."""
    p = sub.add_parser("pack-env", help="pack this environment for a cluster's executors (spark-submit --archives)")
    p.add_argument("--cache-dir", type=nonempty, help="where archives are kept (default ~/.cache/airflow-kafka-stream/envs)")
    p.add_argument("--with", dest="extra", action="append", default=[], type=nonempty,
                   help="another installed distribution your job runs on executors (repeat)")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.set_defaults(handler=_cmd_pack_env)


def _cmd_pack_env(args: argparse.Namespace) -> int:
    from airflow_kafka_stream.cluster.environment import pack_executor_environment

    archive = pack_executor_environment(args.cache_dir, args.extra)
    emit(args, {"archive": str(archive)}, f"{archive}\nship it with: spark-submit --archives {archive}#environment "
          "--conf spark.pyspark.python=./environment/bin/python ...")
    return EXIT_OK
