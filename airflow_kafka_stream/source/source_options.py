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
                         a Python task costs tens of milliseconds before it reads a record.
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
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_kafka_stream.core.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition, parse_offsets_json
from airflow_kafka_stream.errors import CheckpointFormatError, InvalidInputError

SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
ASSIGN = "assign"

# Start position kinds.
START_EARLIEST = "earliest"
START_LATEST = "latest"
START_GROUP = "group"
START_OFFSETS = "offsets"
START_TIMESTAMP = "timestamp"
START_TIMESTAMPS = "timestamps"

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
class Subscription:
    """Which partitions the query reads: a topic list, a pattern, or fixed partitions."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.kind == SUBSCRIBE:
            return f"subscribe={','.join(self.topics)}"
        if self.kind == SUBSCRIBE_PATTERN:
            return f"subscribePattern={self.pattern}"
        return f"assign={', '.join(map(str, self.partitions))}"

    def covers_topic(self, topic: str) -> bool:
        if self.kind == SUBSCRIBE:
            return topic in self.topics
        if self.kind == SUBSCRIBE_PATTERN:
            return re.fullmatch(self.pattern or "", topic) is not None
        return any(tp.topic == topic for tp in self.partitions)


@dataclass(frozen=True)
class StartingPosition:
    """Where a fresh query starts; ``offsets``/``timestamps`` hold the per-partition forms."""

    kind: str
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: PartitionOffsets = field(default_factory=dict)
    group_fallback: int = EARLIEST
    timestamp_strategy: str = "error"


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

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka["bootstrap.servers"]


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options given to ``readStream.format("kafka_stream")``; raise InvalidInputError naming the fix."""
    opts = {str(key).lower(): value for key, value in options.items()}
    kafka = _kafka_options(opts)
    _refuse_unknown(opts)
    subscription = _subscription(opts)
    group_id = _text(opts, "groupId") or kafka.get("group.id")
    starting = _starting(opts, subscription, group_id)
    read_mode = _read_mode(opts)
    return SourceOptions(
        subscription=subscription,
        starting=starting,
        kafka=kafka,
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        min_records_per_task=_positive_int(opts, "minRecordsPerTask") or DEFAULT_MIN_RECORDS_PER_TASK,
        fail_on_data_loss=_boolean(opts, "failOnDataLoss", True),
        include_headers=_boolean(opts, "includeHeaders", False),
        drain_path=_text(opts, "drainPath"),
        start_offsets_path=_text(opts, "startOffsetsPath"),
        group_id=group_id,
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
        native_reader=_boolean(opts, "kafkaConsumer.nativeReader", True),
        consumer_cache=_boolean(opts, "kafkaConsumer.cache", False),
        cache_timeout_ms=_positive_int(opts, "kafkaConsumer.cacheTimeoutMs") or DEFAULT_CACHE_TIMEOUT_MS,
        allow_python_fallback=_boolean(opts, "kafkaConsumer.allowPythonFallback", False),
        idle_poll_interval_ms=_non_negative_int(opts, "idlePollIntervalMs", DEFAULT_IDLE_POLL_INTERVAL_MS),
        read_mode=read_mode,
        driver_read_max_records=_positive_int(opts, "driverReadMaxRecords") or DEFAULT_DRIVER_READ_MAX_RECORDS,
        driver_read_max_bytes=_positive_int(opts, "driverReadMaxBytes") or DEFAULT_DRIVER_READ_MAX_BYTES,
    )


def _read_mode(opts: Mapping[str, str]) -> str:
    """``readMode``, with the options a driver read cannot honour refused (a driver read is one task's worth)."""
    mode = (_text(opts, "readMode") or READ_AUTO).lower()
    if mode not in READ_MODES:
        raise InvalidInputError(f"option readMode must be auto, driver or executors, got {mode!r}")
    if mode != READ_ON_DRIVER:
        return mode
    if _positive_int(opts, "maxOffsetsPerTrigger") is None:
        raise InvalidInputError(
            "option readMode=driver reads every batch into the driver's memory, so it needs a bound on the batch: "
            "set maxOffsetsPerTrigger (e.g. 10000), or use readMode=executors for large batches"
        )
    spread = [name for name in ("minPartitions", "maxRecordsPerPartition") if _text(opts, name) is not None]
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


def _text(opts: Mapping[str, str], name: str) -> str | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _non_negative_int(opts: Mapping[str, str], name: str, default: int) -> int:
    number = _whole_number(opts, name, 0, "a whole number of 0 or more")
    return default if number is None else number


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    return _whole_number(opts, name, 1, "a positive integer")


def _whole_number(opts: Mapping[str, str], name: str, minimum: int, wording: str) -> int | None:
    """The option as an int of at least ``minimum``; None when it is not given."""
    value = _text(opts, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise InvalidInputError(f"option {name} must be {wording}, got {value!r}")
    return number


def _boolean(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = _text(opts, name)
    if value is None:
        return default
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidInputError(f"option {name} must be true or false, got {value!r}")


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN) if _text(opts, name) is not None]
    if len(given) != 1:
        found = f"got {', '.join(given)}" if given else "got none"
        raise InvalidInputError(
            f"exactly one of the options subscribe, subscribePattern and assign must be set ({found}); "
            'e.g. .option("subscribe", "orders,payments")'
        )
    kind = given[0]
    value = _text(opts, kind) or ""
    if kind == SUBSCRIBE:
        topics = tuple(sorted({t.strip() for t in value.split(",") if t.strip()}))
        if not topics:
            raise InvalidInputError(f"option subscribe must list topic names separated by commas, got {value!r}")
        return Subscription(SUBSCRIBE, topics=topics)
    if kind == SUBSCRIBE_PATTERN:
        try:
            re.compile(value)
        except re.error as exc:
            raise InvalidInputError(
                f"option subscribePattern {value!r} is not a valid regular expression: {exc}"
            ) from exc
        return Subscription(SUBSCRIBE_PATTERN, pattern=value)
    return Subscription(ASSIGN, partitions=_assignment(value))


def _assignment(value: str) -> tuple[TopicPartition, ...]:
    example = 'e.g. {"orders": [0, 1], "payments": [0]}'
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"option assign is not valid JSON ({exc.msg}): {value!r}; {example}") from exc
    if not isinstance(data, dict) or not data:
        raise InvalidInputError(
            f"option assign must be a JSON object of topic to partition list, got {value!r}; {example}"
        )
    partitions = set()
    for topic, parts in data.items():
        if not isinstance(parts, list) or not parts or not all(_is_count(p) for p in parts):
            raise InvalidInputError(
                f"option assign: partitions of topic {topic!r} must be a non-empty list of integers >= 0, got {parts!r}"
            )
        partitions.update(TopicPartition(topic, p) for p in parts)
    return tuple(sorted(partitions))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _starting(opts: Mapping[str, str], subscription: Subscription, group_id: str | None) -> StartingPosition:
    strategy = (_text(opts, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise InvalidInputError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")
    fallback_text = (_text(opts, "startingOffsetsGroupFallback") or "earliest").lower()
    if fallback_text not in ("earliest", "latest"):
        raise InvalidInputError(
            f"option startingOffsetsGroupFallback must be earliest or latest, got {fallback_text!r}"
        )
    fallback = EARLIEST if fallback_text == "earliest" else LATEST

    timestamp = _text(opts, "startingTimestamp")
    if timestamp is not None:
        return StartingPosition(
            START_TIMESTAMP, timestamp=_millis("startingTimestamp", timestamp), timestamp_strategy=strategy
        )
    by_timestamp = _text(opts, "startingOffsetsByTimestamp")
    if by_timestamp is not None:
        stamps = _partition_json("startingOffsetsByTimestamp", by_timestamp, subscription, allow_special=False)
        return StartingPosition(START_TIMESTAMPS, timestamps=stamps, timestamp_strategy=strategy)
    starting = _text(opts, "startingOffsets") or "latest"
    if starting.lower() == "earliest":
        return StartingPosition(START_EARLIEST)
    if starting.lower() == "latest":
        return StartingPosition(START_LATEST)
    if starting.lower() == "group":
        if not group_id:
            raise InvalidInputError(
                "startingOffsets=group needs a consumer group: set the option groupId or kafka.group.id"
            )
        return StartingPosition(START_GROUP, group_fallback=fallback)
    if not starting.startswith("{"):
        raise InvalidInputError(
            f"option startingOffsets must be earliest, latest, group or JSON like "
            f'{{"topic": {{"0": 23, "1": -2}}}}, got {starting!r}'
        )
    return StartingPosition(
        START_OFFSETS, offsets=_partition_json("startingOffsets", starting, subscription, allow_special=True)
    )


def _millis(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise InvalidInputError(
            f"option {name} must be epoch milliseconds (an integer like 1700000000000, which carries no time "
            f"zone ambiguity), got {value!r}"
        )
    return number


def _partition_json(name: str, text: str, subscription: Subscription, allow_special: bool) -> PartitionOffsets:
    try:
        values = parse_offsets_json(text, allow_special=allow_special)
    except CheckpointFormatError as exc:
        raise InvalidInputError(f"option {name}: {exc}") from exc
    if not values:
        raise InvalidInputError(f'option {name} names no partition; give e.g. {{"topic": {{"0": 23}}}}')
    stray = sorted({tp.topic for tp in values if not subscription.covers_topic(tp.topic)})
    if stray:
        raise InvalidInputError(
            f"option {name} names topic(s) {', '.join(stray)} that {subscription.describe()} does not read; "
            "remove them or fix the subscription"
        )
    if subscription.kind == ASSIGN:
        assigned = set(subscription.partitions)
        missing = sorted(assigned - set(values))
        extra = sorted(set(values) - assigned)
        if missing or extra:
            raise InvalidInputError(
                f"option {name} must name exactly the assigned partitions: "
                + "; ".join(
                    part
                    for part in (
                        f"missing {', '.join(map(str, missing))}" if missing else "",
                        f"not assigned {', '.join(map(str, extra))}" if extra else "",
                    )
                    if part
                )
            )
    return values
