"""Options of the ``kafka_stream`` source: parsing and validation, no Spark or Kafka access.

The option names are those of Spark's own Kafka source, so a query can move to
``format("kafka")`` where the JVM connector is installed. Option names are
case-insensitive (Spark lower-cases them).

Exactly one of:
  ``subscribe``          comma-separated topic list.
  ``subscribePattern``   regular expression matched against whole topic names; topics and
                         partitions that appear while the query runs are read from their
                         earliest offset.
  ``assign``             JSON ``{"topic": [0, 1]}`` of specific partitions.

Where to start. Used only when the query starts without a checkpoint; a restarted
query resumes from its checkpoint whatever these say. Precedence as in Spark:
``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets``.
  ``startingOffsets``    ``latest`` (default), ``earliest``, ``group`` (the consumer group's
                         committed offsets, as Flink's ``committedOffsets``), or JSON
                         ``{"topic": {"0": 23, "1": -2}}`` naming every partition (-2 earliest,
                         -1 latest).
  ``startingOffsetsGroupFallback``  ``earliest`` (default) or ``latest``: where partitions without
                         a committed offset start when ``startingOffsets=group``.
  ``groupId``            the group for ``startingOffsets=group`` (default: ``kafka.group.id``).
  ``startingOffsetsByTimestamp``  JSON ``{"topic": {"0": 1700000000000}}`` of epoch milliseconds
                         per partition (every partition); each starts at its first record at or
                         after that time.
  ``startingTimestamp``  epoch milliseconds for every partition.
  ``startingOffsetsByTimestampStrategy``  ``error`` (default, as Spark) fails the query when a
                         partition has no record at or after the time; ``latest`` starts such
                         partitions at their end.

How to read:
  ``maxOffsetsPerTrigger``  upper bound on records per micro-batch, spread over partitions in
                         proportion to their backlog (ignored by availableNow's final sweep as in Spark).
  ``minPartitions``      at least this many Spark partitions per batch (big ranges are split).
  ``maxRecordsPerPartition``  split ranges larger than this into several Spark partitions.
  ``minRecordsPerTask``  without minPartitions and maxRecordsPerPartition, partitions' ranges
                         smaller than this share a Spark task (50000; 1: a task per partition):
                         a Python task costs milliseconds before it reads a record. In a local
                         session (register() hands over its cores) a batch also runs in at most
                         one task per core, unless this is 1.
  ``readMode``           where a batch is read. ``auto`` (default): batches of at most
                         ``driverReadMaxRecords`` records are read by the driver while it plans them (no
                         Python task runs: the engine's pace for small batches), larger ones by Spark tasks
                         on the executors (see read_placement.py); ``driver``: every batch on the driver
                         (needs ``maxOffsetsPerTrigger``); ``executors``: every batch by Spark tasks.
  ``driverReadMaxRecords``  with readMode=auto, the largest batch the driver reads itself (20000).
  ``driverReadMaxBytes``  with readMode=auto, the most a driver-read batch may hold in the driver's memory
                         (67108864, 64 MiB); a batch that grows past it while read is read again by tasks.
  ``failOnDataLoss``     ``true`` (default): fail when offsets the query needs are gone
                         (retention, recreated topic); ``false``: log it and go on from the
                         earliest available offset.
  ``includeHeaders``     ``false`` (default); ``true`` adds the ``headers`` column.
  ``kafkaConsumer.pollTimeoutMs``  how long a read may wait for records it knows exist (120000).
  ``idlePollIntervalMs``  after a look at the topics found nothing new, the next look waits until this
                         long after it (100; 0: as often as Spark asks, every 10 ms on an idle
                         topic with the default trigger).
  ``kafkaConsumer.nativeReader``  ``true`` (default): executors read partitions into Arrow in C
                         (librdkafka from the confluent-kafka wheel) when the package's extension
                         is built; ``false``: read through confluent-kafka in Python. Headers
                         (``includeHeaders=true``) are always read in Python.
  ``kafkaConsumer.cache``  ``false`` (default): every task makes and closes its own consumers;
                         ``true``: a Python worker keeps each partition's consumer for the next
                         batch's task (see consumer_cache.py and docs/source.md for its cost).
  ``kafkaConsumer.cacheTimeoutMs``  how long a kept consumer may stay idle before it is closed
                         (300000, as Spark's spark.kafka.consumer.cache.timeout).
  ``kafkaConsumer.allowPythonFallback``  ``false`` (default): a task whose executor lacks the C reader
                         (extension not built, or shipped in a ``--py-files`` zip, or no librdkafka)
                         fails naming the reason, instead of running 30% slower unnoticed;
                         ``true``: such a task reads in Python and logs why.
  ``drainPath``          directory URL (any fsspec URL) of the graceful-stop handshake: when
                         ``<drainPath>/stop`` exists the source plans no new batch and writes
                         ``<drainPath>/drained.json``.
  ``startOffsetsPath``   file URL (any fsspec URL) where a fresh start writes the offsets it resolved
                         (``{"offsets": {...}, "starting": kind, "at": iso time}``): a Python source's
                         checkpoint keeps no record of where the query first started.
  ``kafka.<name>``       passed to the confluent-kafka (librdkafka) client as ``<name>``;
                         ``kafka.bootstrap.servers`` is required. Values are never logged.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_kafka_stream.core.offsets import TopicPartition, parse_offsets_json
from airflow_kafka_stream.errors import CheckpointFormatError, InvalidInputError
from airflow_kafka_stream.source.option_values import boolean, non_negative_int, positive_int, text
from airflow_kafka_stream.source.subscription import (
    ASSIGN,
    SUBSCRIBE,
    SUBSCRIBE_PATTERN,
    StartingPosition,
    Subscription,
    parse_starting,
    parse_subscription,
)

DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_CACHE_TIMEOUT_MS = 300_000
DEFAULT_MIN_RECORDS_PER_TASK = 50_000
#: An idle query's looks at the topics, at most one per this many ms (Spark asks every 10 ms).
DEFAULT_IDLE_POLL_INTERVAL_MS = 100
#: readMode=auto: the largest batch, in records and in bytes, the driver reads while it plans it.
DEFAULT_DRIVER_READ_MAX_RECORDS = 20_000
DEFAULT_DRIVER_READ_MAX_BYTES = 64 * 1024 * 1024

READ_AUTO = "auto"
READ_ON_EXECUTORS = "executors"
READ_ON_DRIVER = "driver"
READ_MODES = (READ_AUTO, READ_ON_DRIVER, READ_ON_EXECUTORS)

#: Every option this source reads, in the spelling the documentation uses.
KNOWN_OPTIONS = (
    SUBSCRIBE,
    SUBSCRIBE_PATTERN,
    ASSIGN,
    "startingOffsets",
    "startingOffsetsGroupFallback",
    "groupId",
    "startingOffsetsByTimestamp",
    "startingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "maxRecordsPerPartition",
    "minRecordsPerTask",
    "readMode",
    "driverReadMaxRecords",
    "driverReadMaxBytes",
    "failOnDataLoss",
    "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
    "idlePollIntervalMs",
    "kafkaConsumer.nativeReader",
    "kafkaConsumer.cache",
    "kafkaConsumer.cacheTimeoutMs",
    "kafkaConsumer.allowPythonFallback",
    "drainPath",
    "startOffsetsPath",
    "bindingPath",
    "rehearsalEndOffsets",
)

#: Options of Spark's Kafka source that are accepted and have no effect here.
IGNORED_SPARK_OPTIONS = ("groupIdPrefix", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "path")

#: Options of Spark's Kafka source this source refuses, with the reason.
REFUSED_OPTIONS = {
    "endingoffsets": "endingOffsets only applies to batch queries; a streaming query runs until stopped "
    "(use trigger(availableNow=True) to stop at the end of the data present at start)",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp only applies to batch queries",
    "endingtimestamp": "endingTimestamp only applies to batch queries",
    "minoffsetspertrigger": "minOffsetsPerTrigger is not supported by kafka_stream; remove it",
    "maxtriggerdelay": "maxTriggerDelay is not supported by kafka_stream; remove it",
}

#: Kafka client settings this source manages itself (as Spark's Kafka source refuses them).
REFUSED_KAFKA_OPTIONS = {
    "auto.offset.reset": "set the option startingOffsets instead",
    "enable.auto.commit": "the source tracks offsets in the checkpoint and never auto-commits",
    "key.deserializer": "keys are always binary; deserialize with DataFrame operations (e.g. CAST(key AS STRING))",
    "value.deserializer": "values are always binary; deserialize with DataFrame operations",
    "interceptor.classes": "Java interceptors do not exist in confluent-kafka",
    "sasl.jaas.config": "librdkafka has no JAAS; use kafka.sasl.mechanism, kafka.sasl.username and kafka.sasl.password",
}

_LOWER = {name.lower(): name for name in (*KNOWN_OPTIONS, *IGNORED_SPARK_OPTIONS)}


@dataclass(frozen=True)
class SourceOptions:
    """The validated options of one ``kafka_stream`` query."""

    subscription: Subscription
    starting: StartingPosition
    kafka: dict[str, str]
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    min_records_per_task: int = DEFAULT_MIN_RECORDS_PER_TASK
    fail_on_data_loss: bool = True
    include_headers: bool = False
    drain_path: str | None = None
    start_offsets_path: str | None = None
    group_id: str | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    native_reader: bool = True
    consumer_cache: bool = False
    cache_timeout_ms: int = DEFAULT_CACHE_TIMEOUT_MS
    allow_python_fallback: bool = False
    idle_poll_interval_ms: int = DEFAULT_IDLE_POLL_INTERVAL_MS
    #: Where batches are read: ``auto`` (small ones on the driver), ``driver`` or ``executors``.
    read_mode: str = READ_AUTO
    driver_read_max_records: int = DEFAULT_DRIVER_READ_MAX_RECORDS
    driver_read_max_bytes: int = DEFAULT_DRIVER_READ_MAX_BYTES
    #: Offsets no batch reads past (an upgrade rehearsal's bound; set by the runtime, not by users).
    end_offsets: Mapping[TopicPartition, int] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka["bootstrap.servers"]


#: Kafka's isolation levels: read to the high watermark, or to the last stable offset skipping aborted records.
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options given to ``readStream.format("kafka_stream")``; raise InvalidInputError naming the fix."""
    opts = {str(key).lower(): value for key, value in options.items()}
    kafka = _kafka_options(opts)
    _refuse_unknown(opts)
    subscription = parse_subscription(opts)
    group_id = text(opts, "groupId") or kafka.get("group.id")
    starting = parse_starting(opts, subscription, group_id)
    read_mode = _read_mode(opts)
    return SourceOptions(
        subscription=subscription,
        starting=starting,
        kafka=kafka,
        max_offsets_per_trigger=positive_int(opts, "maxOffsetsPerTrigger"),
        min_partitions=positive_int(opts, "minPartitions"),
        max_records_per_partition=positive_int(opts, "maxRecordsPerPartition"),
        min_records_per_task=positive_int(opts, "minRecordsPerTask") or DEFAULT_MIN_RECORDS_PER_TASK,
        fail_on_data_loss=boolean(opts, "failOnDataLoss", True),
        include_headers=boolean(opts, "includeHeaders", False),
        drain_path=text(opts, "drainPath"),
        start_offsets_path=text(opts, "startOffsetsPath"),
        group_id=group_id,
        poll_timeout_ms=positive_int(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
        native_reader=boolean(opts, "kafkaConsumer.nativeReader", True),
        consumer_cache=boolean(opts, "kafkaConsumer.cache", False),
        cache_timeout_ms=positive_int(opts, "kafkaConsumer.cacheTimeoutMs") or DEFAULT_CACHE_TIMEOUT_MS,
        allow_python_fallback=boolean(opts, "kafkaConsumer.allowPythonFallback", False),
        idle_poll_interval_ms=non_negative_int(opts, "idlePollIntervalMs", DEFAULT_IDLE_POLL_INTERVAL_MS),
        read_mode=read_mode,
        driver_read_max_records=positive_int(opts, "driverReadMaxRecords") or DEFAULT_DRIVER_READ_MAX_RECORDS,
        driver_read_max_bytes=positive_int(opts, "driverReadMaxBytes") or DEFAULT_DRIVER_READ_MAX_BYTES,
        end_offsets=_end_offsets(opts),
    )


def _end_offsets(opts: Mapping[str, str]) -> dict[TopicPartition, int] | None:
    given = text(opts, "rehearsalEndOffsets")
    if given is None:
        return None
    try:
        return parse_offsets_json(given)
    except CheckpointFormatError as exc:
        raise InvalidInputError(f"option rehearsalEndOffsets: {exc}") from None


def _read_mode(opts: Mapping[str, str]) -> str:
    """``readMode``, with the options a driver read cannot honour refused (a driver read is one task's worth)."""
    mode = (text(opts, "readMode") or READ_AUTO).lower()
    if mode not in READ_MODES:
        raise InvalidInputError(f"option readMode must be auto, driver or executors, got {mode!r}")
    if mode != READ_ON_DRIVER:
        return mode
    if positive_int(opts, "maxOffsetsPerTrigger") is None:
        raise InvalidInputError(
            "option readMode=driver reads every batch into the driver's memory, so it needs a bound on the batch: "
            "set maxOffsetsPerTrigger (e.g. 10000), or use readMode=executors for large batches"
        )
    spread = [name for name in ("minPartitions", "maxRecordsPerPartition") if text(opts, name) is not None]
    if spread:
        raise InvalidInputError(
            f"option readMode=driver reads each batch in one process, so {' and '.join(spread)} cannot apply; "
            "remove it, or use readMode=executors to spread a batch over tasks"
        )
    return mode


def _kafka_options(opts: Mapping[str, str]) -> dict[str, str]:
    kafka = {key[len("kafka.") :]: str(value) for key, value in opts.items() if key.startswith("kafka.")}
    for name, reason in REFUSED_KAFKA_OPTIONS.items():
        if name in kafka:
            raise InvalidInputError(f"option kafka.{name} is not supported: {reason}")
    if not kafka.get("bootstrap.servers", "").strip():
        raise InvalidInputError(
            'option kafka.bootstrap.servers is required: .option("kafka.bootstrap.servers", "host1:9092,host2:9092")'
        )
    level = kafka.get("isolation.level")
    if level is not None and level.strip().lower() not in ISOLATION_LEVELS:
        # Planning would fall back to read_uncommitted while the reading consumer refused the value.
        raise InvalidInputError(f"option kafka.isolation.level must be read_uncommitted (the default) or "
                                f"read_committed, got {level!r}")
    return kafka


def _refuse_unknown(opts: Mapping[str, str]) -> None:
    for key in opts:
        if key in REFUSED_OPTIONS:
            raise InvalidInputError(f"option {key!r} is not valid for kafka_stream: {REFUSED_OPTIONS[key]}")
        if key in _LOWER or key.startswith("kafka."):
            continue
        close = difflib.get_close_matches(key, list(_LOWER), n=1, cutoff=0.8)
        if close:
            raise InvalidInputError(f"unknown option {key!r}: did you mean {_LOWER[close[0]]!r}?")
        if key.startswith(("bootstrap.", "security.", "sasl.", "ssl.", "group.")):
            raise InvalidInputError(
                f"unknown option {key!r}: Kafka client settings need the prefix 'kafka.' (kafka.{key})"
            )
