"""What the commands that start drivers share: the submission's options, the Kafka settings, the launcher.

Secrets come from the ``--command-config`` properties file and reach the driver in its environment only;
the submission recorded in the job home (and every process argument) holds none.
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_kafka_stream.cli.common import nonempty
from airflow_kafka_stream.core.kafka_connector import KafkaConnector
from airflow_kafka_stream.core.redaction import is_secret_key
from airflow_kafka_stream.core.spark_kafka_options import SOURCE_FORMATS
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.properties import read_properties

# Lazy imports: kafka.clients (confluent-kafka), ops.submission_plan and ops.spark_submit wait for a launch, so
# --help and the other commands start without them.


def add_kafka_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", type=nonempty,
                   help="Kafka brokers (default: --command-config's bootstrap.servers, else job.json's)")
    p.add_argument("--command-config", type=nonempty,
                   help="client properties file (bootstrap.servers, security settings, secrets): the driver gets "
                        "them in its environment, never in its arguments")


def add_launch_args(p: argparse.ArgumentParser, *, version_required: bool = True) -> None:
    """The options of a submission: the application, its arguments, Spark's settings, where it runs."""
    p.add_argument("--app-version", type=nonempty, required=version_required,
                   help="the application version being started (recorded in job.json and savepoints)")
    p.add_argument("--application", type=nonempty,
                   help="the PySpark file to run (default: the package's example pipeline)")
    p.add_argument("--topic", action="append", default=[], type=nonempty,
                   help="with the example pipeline: a topic it reads (repeatable)")
    p.add_argument("--group", type=nonempty, help="with the example pipeline: the consumer group it commits to")
    p.add_argument("--output", type=nonempty, help="with the example pipeline: its output directory")
    p.add_argument("--starting-offsets", default="earliest", type=nonempty,
                   help="with the example pipeline: where a fresh checkpoint starts (earliest, latest, group, JSON)")
    p.add_argument("--source", choices=SOURCE_FORMATS,
                   help="with the example pipeline: the source it reads with, this project's kafka_stream (default) "
                        "or Spark's own connector kafka; an upgrade that gives only this moves the job between them")
    p.add_argument("--output-topic", type=nonempty,
                   help="with the example pipeline: write its events to this Kafka topic, exactly once (a transactional "
                        "sink, docs/sink.md), instead of Parquet files under --output")
    p.add_argument("--skip-replays", action="store_true",
                   help="with --output-topic: records a rewind (reset, restore) reads again are not written again")
    p.add_argument("--output-asset", type=nonempty,
                   help="with the example pipeline: its output as an Airflow asset URI; each complete event-time "
                        "window is announced to Airflow once (docs/assets.md)")
    p.add_argument("--asset-every", type=nonempty, help="with --output-asset: the window each event announces "
                   "(ISO 8601 duration dividing a day, default PT1H)")
    p.add_argument("--watermark-delay", type=nonempty, help="with --output-asset: how late an event may come "
                   "(ISO 8601 duration, default PT10M)")
    p.add_argument("--master", type=nonempty,
                   help="the Spark master (local[2], spark://host:7077, yarn, k8s://...; default: the version's "
                        "recorded one, else local[*])")
    p.add_argument("--deploy-mode", choices=["client", "cluster"], help="where the driver runs (default client)")
    p.add_argument("--conf", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                   help="a Spark setting for spark-submit (repeatable; never a secret: use --command-config)")
    p.add_argument("--executor-environment", type=nonempty,
                   help="the executors' Python on a cluster: packed, an archive, or python:/path/bin/python")
    p.add_argument("--job-home-shared", action="store_true",
                   help="the local job home path is a shared mount seen at the same path on every node")
    p.add_argument("--kafka-connector", choices=[choice.value for choice in KafkaConnector],
                   help="where the driver's copy of Spark's Kafka connector (format(\"kafka\")) comes from: auto "
                        "(default: the installed jars unless Spark already has them), bundled, or provided (the "
                        "cluster has it); a new version keeps the running version's")
    p.add_argument("--spark-submit", type=nonempty, help="the spark-submit program (default: the one on PATH)")
    p.add_argument("application_args", nargs="*", metavar="-- ARG",
                   help="arguments of --application, after --")


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError("expected KEY=VALUE, e.g. spark.executor.memory=2g")
    return key.strip(), value


def kafka_settings(args: argparse.Namespace, home: Any | None) -> dict[str, Any]:
    """The librdkafka settings: job.json's (no secrets there), the properties file's, then --bootstrap-server."""
    from airflow_kafka_stream.kafka.clients import check_client_config

    spec = home.spec() if home is not None and home.exists() else {}
    kafka: dict[str, Any] = {k: v for k, v in (spec.get("kafka") or {}).items() if not is_secret_key(k)}
    if args.command_config:
        kafka.update(read_properties(args.command_config))
    if args.bootstrap_server:
        kafka["bootstrap.servers"] = args.bootstrap_server
    if not kafka.get("bootstrap.servers"):
        raise InvalidInputError("no Kafka brokers known for this job: give them (or set bootstrap.servers in the "
                                "client properties file)", setting="bootstrap_servers")
    kafka.pop("group.id", None)  # the group belongs to the job, not to client settings shared by several jobs
    check_client_config(kafka)
    return kafka


def submission_from(args: argparse.Namespace, home: Any, kafka: dict[str, Any], *, new_version: bool = False):
    """The submission the options describe (``ops.submission_plan``); for a ``new_version`` of a job that has run
    (an upgrade, a standby, a check), what the options do not give comes from the running version's."""
    from airflow_kafka_stream.ops.submission_plan import SubmissionRequest, plan_submission, running_submission

    request = SubmissionRequest(
        app_version=args.app_version, application=args.application, application_args=tuple(args.application_args),
        topics=tuple(args.topic), group=args.group, output_path=args.output, starting_offsets=args.starting_offsets,
        spark_conf=dict(args.conf), master=args.master, deploy_mode=args.deploy_mode,
        executor_environment=args.executor_environment, job_home_shared=True if args.job_home_shared else None,
        kafka_connector=args.kafka_connector, source=getattr(args, "source", None),
        output_asset=args.output_asset, output_topic=args.output_topic, asset_every=args.asset_every,
        skip_replays=args.skip_replays, watermark_delay=args.watermark_delay)
    return plan_submission(request, job_home=home.url, bootstrap_servers=kafka["bootstrap.servers"],
                           running=running_submission(home) if new_version else None)


def launcher_from(args: argparse.Namespace, home: Any, kafka: dict[str, Any]):
    from airflow_kafka_stream.ops.spark_submit import SparkSubmitLauncher

    return SparkSubmitLauncher(home.url, getattr(args, "master", None), kafka, home.storage_options,
                               getattr(args, "spark_submit", None))
