"""Option parsing of the kafka_stream source and the pure planning of its batches."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.offsets import EARLIEST, LATEST, TopicPartition
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.source.offset_ranges import (
    OffsetRange,
    find_lost_offsets,
    group_ranges,
    plan_ranges,
    rate_limit,
)
from airflow_kafka_stream.source.source_options import parse_source_options
from airflow_kafka_stream.source.subscription import (
    ASSIGN,
    START_EARLIEST,
    START_GROUP,
    START_LATEST,
    START_OFFSETS,
    START_TIMESTAMP,
    START_TIMESTAMPS,
    SUBSCRIBE,
    SUBSCRIBE_PATTERN,
)

BOOT = {"kafka.bootstrap.servers": "b:9092"}
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def options(**given: str) -> dict[str, str]:
    return {**BOOT, **{key.replace("__", "."): value for key, value in given.items()}}


@pytest.mark.parametrize(
    "given, kind, expected",
    [
        pytest.param({"subscribe": "b, a,a"}, SUBSCRIBE, ("a", "b"), id="subscribe-trims-dedupes-sorts"),
        pytest.param({"subscribePattern": "a.*"}, SUBSCRIBE_PATTERN, "a.*", id="pattern-kept-as-is"),
        pytest.param({"assign": '{"a": [1, 0]}'}, ASSIGN, (A0, A1), id="assign-sorted-partitions"),
        pytest.param({"SUBSCRIBE": "a"}, SUBSCRIBE, ("a",), id="option-names-case-insensitive-as-spark"),
    ],
)
def test_subscription(given, kind, expected):
    sub = parse_source_options({**BOOT, **given}).subscription
    assert sub.kind == kind
    assert {SUBSCRIBE: sub.topics, SUBSCRIBE_PATTERN: sub.pattern, ASSIGN: sub.partitions}[kind] == expected


@pytest.mark.parametrize(
    "given, kind, detail",
    [
        pytest.param({}, START_LATEST, None, id="default-latest-like-spark"),
        pytest.param({"startingOffsets": "EARLIEST"}, START_EARLIEST, None, id="keyword-case-insensitive"),
        pytest.param(
            {"startingOffsets": '{"a": {"0": 5, "1": -2}}'},
            START_OFFSETS,
            {A0: 5, A1: EARLIEST},
            id="json-keeps-special-values-until-resolved",
        ),
        pytest.param(
            {"startingTimestamp": "1700000000000"}, START_TIMESTAMP, 1700000000000, id="timestamp-all-partitions"
        ),
        pytest.param(
            {"startingOffsetsByTimestamp": '{"a": {"0": 10}}', "startingOffsets": "earliest"},
            START_TIMESTAMPS,
            {A0: 10},
            id="by-timestamp-wins-over-offsets-as-in-spark",
        ),
        pytest.param(
            {"startingTimestamp": "7", "startingOffsetsByTimestamp": '{"a": {"0": 10}}'},
            START_TIMESTAMP,
            7,
            id="timestamp-wins-over-by-timestamp-as-in-spark",
        ),
        pytest.param(
            {"startingOffsets": "group", "kafka.group.id": "g"}, START_GROUP, EARLIEST, id="group-falls-back-earliest"
        ),
        pytest.param(
            {"startingOffsets": "group", "groupId": "g", "startingOffsetsGroupFallback": "latest"},
            START_GROUP,
            LATEST,
            id="group-fallback-latest",
        ),
    ],
)
def test_starting_position(given, kind, detail):
    starting = parse_source_options({**BOOT, "subscribe": "a", **given}).starting
    assert starting.kind == kind
    if kind == START_OFFSETS:
        assert starting.offsets == detail
    elif kind == START_TIMESTAMPS:
        assert starting.timestamps == detail
    elif kind == START_TIMESTAMP:
        assert starting.timestamp == detail
    elif kind == START_GROUP:
        assert starting.group_fallback == detail


def test_defaults_and_kafka_passthrough():
    parsed = parse_source_options(
        {**BOOT, "subscribe": "a", "kafka.security.protocol": "SASL_SSL", "maxOffsetsPerTrigger": "100"}
    )
    assert parsed.kafka == {"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL"}
    assert parsed.max_offsets_per_trigger == 100
    assert (parsed.fail_on_data_loss, parsed.include_headers, parsed.drain_path) == (True, False, None)
    assert parsed.native_reader is True
    assert parse_source_options({**BOOT, "subscribe": "a", "kafkaConsumer.nativeReader": "false"}).native_reader is False
    assert parsed.idle_poll_interval_ms == 100
    assert parse_source_options({**BOOT, "subscribe": "a", "idlePollIntervalMs": "0"}).idle_poll_interval_ms == 0
    assert parsed.read_mode == "auto"  # the default: small batches on the driver (read_placement.py)
    assert (parsed.driver_read_max_records, parsed.driver_read_max_bytes) == (20_000, 64 * 1024 * 1024)
    driver = parse_source_options({**BOOT, "subscribe": "a", "readMode": "Driver", "maxOffsetsPerTrigger": "500"})
    assert driver.read_mode == "driver"


@pytest.mark.parametrize(
    "given, message",
    [
        pytest.param({"subscribe": "a"}, "kafka.bootstrap.servers is required", id="no-bootstrap"),
        pytest.param({**BOOT}, "exactly one of .* \\(got none\\)", id="no-subscription"),
        pytest.param(
            {**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, "got subscribe, assign", id="subscribe-and-assign"
        ),
        pytest.param({**BOOT, "subscribe": " , "}, "must list topic names", id="empty-topic-list"),
        pytest.param({**BOOT, "subscribePattern": "("}, "not a valid regular expression", id="bad-pattern"),
        pytest.param({**BOOT, "assign": "{a:[0]}"}, "assign is not valid JSON", id="assign-not-json"),
        pytest.param({**BOOT, "assign": '{"a": [-1]}'}, "integers >= 0", id="assign-negative-partition"),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffsets": '{"a": {"0": }}'},
            "startingOffsets: .*not valid JSON",
            id="malformed-offsets-json",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'},
            "-2 \\(earliest\\), -1 \\(latest\\)",
            id="negative-offset-not-special",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffsets": '{"b": {"0": 1}}'},
            "names topic\\(s\\) b that subscribe=a",
            id="offsets-for-other-topic",
        ),
        pytest.param(
            {**BOOT, "assign": '{"a": [0, 1]}', "startingOffsets": '{"a": {"0": 1}}'},
            "missing a:1",
            id="offsets-must-cover-assignment",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffsets": "newest"},
            "earliest, latest, group or JSON",
            id="unknown-keyword",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffsets": "group"}, "needs a consumer group", id="group-without-id"
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingTimestamp": "2024-01-01T00:00:00"},
            "epoch milliseconds",
            id="iso-timestamp-refused",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingTimestamp": "-5"}, "epoch milliseconds", id="negative-timestamp"
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -1}}'},
            "must be >= 0",
            id="by-timestamp-no-special",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "positive integer, got '0'", id="max-offsets-zero"
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "1e3"}, "positive integer", id="max-offsets-not-integer"
        ),
        pytest.param({**BOOT, "subscribe": "a", "failOnDataLoss": "yes"}, "true or false", id="boolean-spelling"),
        pytest.param({**BOOT, "subscribe": "a", "idlePollIntervalMs": "-1"}, "idlePollIntervalMs must be a whole number",
                     id="idle-poll-negative"),
        pytest.param({**BOOT, "subscribe": "a", "idlePollIntervalMs": "0.5s"}, "0 or more, got '0.5s'",
                     id="idle-poll-not-integer"),
        pytest.param({**BOOT, "subscribe": "a", "idlePollIntervalMs": "\u00b2"}, "0 or more, got '\u00b2'",
                     id="idle-poll-unicode-digit"),
        pytest.param({**BOOT, "subscribe": "a", "readMode": "tasks"}, "readMode must be auto, driver or executors, got 'tasks'",
                     id="read-mode-unknown"),
        pytest.param({**BOOT, "subscribe": "a", "driverReadMaxRecords": "0"},
                     "option driverReadMaxRecords must be a positive integer, got '0'", id="driver-read-bound-zero"),
        pytest.param({**BOOT, "subscribe": "a", "driverReadMaxBytes": "64MiB"},
                     "option driverReadMaxBytes must be a positive integer, got '64MiB'", id="driver-read-bytes-text"),
        pytest.param({**BOOT, "subscribe": "a", "readMode": "driver"},
                     "readMode=driver reads every batch into the driver's memory.*set maxOffsetsPerTrigger",
                     id="read-on-driver-unbounded"),
        pytest.param({**BOOT, "subscribe": "a", "readMode": "driver", "maxOffsetsPerTrigger": "9",
                      "minPartitions": "4"}, "so minPartitions cannot apply; remove it", id="read-on-driver-spread"),
        pytest.param(
            {**BOOT, "subscribe": "a", "kafkaConsumer.nativeReader": "off"},
            "kafkaConsumer.nativeReader must be true or false",
            id="native-reader-spelling",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffset": "earliest"},
            "did you mean 'startingOffsets'",
            id="typo-suggested",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "bootstrap.servers": "x"}, "need the prefix 'kafka.'", id="missing-kafka-prefix"
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            "startingOffsets instead",
            id="auto-offset-reset-refused",
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "endingOffsets": "latest"}, "only applies to batch", id="ending-offsets-refused"
        ),
        pytest.param(
            {**BOOT, "subscribe": "a", "startingOffsetsGroupFallback": "none"}, "earliest or latest", id="bad-fallback"
        ),
    ],
)
def test_bad_options_name_the_fix(given, message):
    with pytest.raises(InvalidInputError, match=message):
        parse_source_options(given)


@pytest.mark.parametrize(
    "start, end, limit, expected",
    [
        pytest.param({A0: 0, A1: 0}, {A0: 10, A1: 10}, 100, {A0: 10, A1: 10}, id="under-limit-unchanged"),
        pytest.param({A0: 0, A1: 0}, {A0: 30, A1: 10}, 20, {A0: 15, A1: 5}, id="shared-by-backlog"),
        pytest.param({A0: 5, A1: 0}, {A0: 6, A1: 1000}, 3, {A0: 5, A1: 3}, id="exact-total-largest-remainder"),
        pytest.param({A0: 0, A1: 7}, {A0: 9, A1: 7}, 4, {A0: 4, A1: 7}, id="no-backlog-no-share"),
        pytest.param({A0: 0}, {A0: 10, B0: 10}, 10, {A0: 10, B0: 10}, id="unknown-start-reads-nothing-there"),
    ],
)
def test_rate_limit(start, end, limit, expected):
    limited = rate_limit(start, end, limit)
    assert limited == expected
    assert sum(limited[tp] - start.get(tp, limited[tp]) for tp in limited) <= limit


@pytest.mark.parametrize(
    "start, end, min_parts, max_records, expected",
    [
        pytest.param(
            {A0: 0, A1: 5}, {A0: 10, A1: 5}, None, None, [OffsetRange("a", 0, 0, 10)], id="empty-range-dropped"
        ),
        pytest.param(
            {A0: 0},
            {A0: 10},
            3,
            None,
            [OffsetRange("a", 0, 0, 3), OffsetRange("a", 0, 3, 6), OffsetRange("a", 0, 6, 10)],
            id="min-partitions-splits",
        ),
        pytest.param(
            {A0: 0, A1: 0},
            {A0: 90, A1: 10},
            4,
            None,
            [
                OffsetRange("a", 0, 0, 22),
                OffsetRange("a", 0, 22, 45),
                OffsetRange("a", 0, 45, 67),
                OffsetRange("a", 0, 67, 90),
                OffsetRange("a", 1, 0, 10),
            ],
            id="split-in-proportion-rounded-as-spark",
        ),
        pytest.param(
            {A0: 0},
            {A0: 5},
            None,
            2,
            [OffsetRange("a", 0, 0, 1), OffsetRange("a", 0, 1, 3), OffsetRange("a", 0, 3, 5)],
            id="max-records-per-partition",
        ),
        pytest.param(
            {A0: 0}, {A0: 2}, 10, None, [OffsetRange("a", 0, 0, 1), OffsetRange("a", 0, 1, 2)], id="never-empty-pieces"
        ),
    ],
)
def test_plan_ranges(start, end, min_parts, max_records, expected):
    assert plan_ranges(start, end, min_parts, max_records) == expected


def _r(partition: int, size: int) -> OffsetRange:
    return OffsetRange("a", partition, 100, 100 + size)


@pytest.mark.parametrize(
    "sizes, min_per_task, expected",
    [
        pytest.param([100, 100, 100], 50_000, [[0, 1, 2]], id="small-batch-one-task"),
        pytest.param([500_000] * 4, 50_000, [[0], [1], [2], [3]], id="large-ranges-keep-a-task-each"),
        pytest.param([100] * 3, 1, [[0], [1], [2]], id="one-record-minimum-is-the-old-plan"),
        pytest.param([60_000, 30_000, 20_000, 10_000], 50_000, [[0], [1], [2, 3]], id="largest-first-into-emptiest"),
        pytest.param([], 50_000, [], id="nothing-to-read"),
        pytest.param([10] * 20, 50_000, [list(range(0, 20, 3)), list(range(1, 20, 3)), list(range(2, 20, 3))],
                     id="wide-topic-at-most-8-ranges-a-task"),
    ],
)
def test_group_ranges(sizes, min_per_task, expected):
    """Small ranges share a task (a Python task's own cost dwarfs reading a few hundred records)."""
    ranges = [_r(p, size) for p, size in enumerate(sizes)]
    tasks = group_ranges(ranges, min_per_task)
    assert [[r.partition for r in task] for task in tasks] == expected
    assert sorted(r for task in tasks for r in task) == sorted(ranges)  # every range read, once


@pytest.mark.parametrize(
    "sizes, slots, expected",
    [
        pytest.param([500_000] * 4, 2, [[0, 2], [1, 3]], id="a-local-session-reads-a-batch-in-one-wave"),
        pytest.param([500_000] * 4, 8, [[0], [1], [2], [3]], id="more-cores-than-ranges-a-task-each"),
        pytest.param([900_000, 300_000, 300_000, 300_000], 2, [[0], [1, 2, 3]], id="balanced-by-records"),
        pytest.param([100_000] * 32, 2, [list(range(p, 32, 4)) for p in range(4)],
                     id="still-at-most-8-ranges-a-task"),
        pytest.param([100] * 3, 2, [[0, 1, 2]], id="small-batches-pack-as-before"),
    ],
)
def test_group_ranges_at_most_a_task_per_core(sizes, slots, expected):
    """A local session's cores cap the tasks (one wave), but no task reads more than 8 ranges in a row."""
    ranges = [_r(p, size) for p, size in enumerate(sizes)]
    tasks = group_ranges(ranges, 50_000, slots)
    assert [[r.partition for r in task] for task in tasks] == expected
    assert sorted(r for task in tasks for r in task) == sorted(ranges)


def test_a_one_record_minimum_keeps_a_task_per_partition_in_a_local_session():
    ranges = [_r(p, 500_000) for p in range(4)]
    assert [[r.partition for r in task] for task in group_ranges(ranges, 1, 2)] == [[0], [1], [2], [3]]


@pytest.mark.parametrize(
    "start, bounds, lost",
    [
        pytest.param({A0: 5}, {A0: (0, 10)}, [], id="inside-is-fine"),
        pytest.param({A0: 10}, {A0: (0, 10)}, [], id="at-high-is-fine-nothing-new"),
        pytest.param({A0: 2}, {A0: (4, 10)}, [(A0, 4, "retention")], id="below-low-retention"),
        pytest.param({A0: 12}, {A0: (0, 3)}, [(A0, 0, "recreated")], id="above-high-recreated-topic"),
        pytest.param({A0: 1}, {}, [(A0, 0, "no longer exists")], id="deleted-partition"),
    ],
)
def test_find_lost_offsets(start, bounds, lost):
    found = find_lost_offsets(start, bounds)
    assert [(x.tp, x.resume_at) for x in found] == [(tp, resume) for tp, resume, _ in lost]
    for item, (_tp, _resume, words) in zip(found, lost, strict=True):
        assert words in item.describe()


@pytest.mark.parametrize("headers", [False, True], ids=["without-headers", "with-headers"])
def test_arrow_batches_match_what_spark_expects(headers):
    """Spark refuses a batch whose Arrow schema differs in any detail (DATA_SOURCE_RETURN_SCHEMA_MISMATCH)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from airflow_kafka_stream.source.arrow_rows import arrow_schema
    from airflow_kafka_stream.source.source import source_schema

    assert arrow_schema(headers).equals(to_arrow_schema(source_schema(headers), timezone="UTC"))
