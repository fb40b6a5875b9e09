"""Where every public name of the old ``airflow_kafka_stream.spark`` modules lives now, and the re-export each
deprecated module makes of them.

The table lists each old module's public names as they were before the split into ``source/`` and
``runtime/`` (commit aeda1d6), so a job written against any of them still imports, warned
(DeprecationWarning) with the module to import instead. ``tests/unit/package/test_spark_aliases.py`` imports every
old path and name.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Moved:
    """An old module's new home, its names found there, and the names that went to another module."""

    module: str
    names: tuple[str, ...]
    elsewhere: dict[str, str] = field(default_factory=dict)


MOVED: dict[str, Moved] = {
    "arrow_rows": Moved("airflow_kafka_stream.source.arrow_rows", (
        "CONSUME_BATCH", "READ_DEFAULTS", "POLL_WAIT_SECONDS", "ESCALATED_FETCH_WAITS_MS",
        "EMPTY_POLLS_BEFORE_ESCALATING", "WATERMARK_TIMEOUT_SECONDS", "TRANSIENT_ERRORS", "GONE_ERRORS",
        "arrow_schema", "consumer_config", "consumer_settings", "open_partition", "read_range",
        "first_fetch_wait_ms", "PartitionRead", "read_polls", "data_loss_message")),
    "consumer_cache": Moved("airflow_kafka_stream.source.consumer_cache", (
        "CAPACITY", "CLIENT_ERRORS", "Reusable", "CacheKey", "CacheStats", "ConsumerCache", "CONSUMERS")),
    "dead_letter": Moved("airflow_kafka_stream.runtime.dead_letter", (
        "ERROR_COLUMN", "PARSED_COLUMN", "METADATA_COLUMNS", "KAFKA_SCHEME", "parse_json_values",
        "split_dead_letters", "DeadLetterSink", "PathDeadLetters", "KafkaDeadLetters")),
    "driver_consumers": Moved("airflow_kafka_stream.source.driver_consumers", (
        "KEPT_FETCH_WAIT_MS", "MIN_QUEUE_RECORDS", "MIN_QUEUE_KBYTES", "MAX_KEPT", "DriverConsumers")),
    "driver_reader": Moved("airflow_kafka_stream.source.driver_reader", (
        "READ_THREADS", "MAX_PREFETCHED", "KafkaDriverReader")),
    "group_committer": Moved("airflow_kafka_stream.runtime.group_committer", (
        "CommitFn", "GroupCommitter", "KafkaGroupCommit")),
    "lag_sampler": Moved("airflow_kafka_stream.runtime.lag_sampler", (
        "REQUEST_TIMEOUT_SECONDS", "Watermarks", "records_waiting", "LagSampler")),
    "native_reader": Moved("airflow_kafka_stream.source.native_reader", (
        "MAX_BATCH_BYTES", "TIMESTAMP_TYPE", "BOUND_MARKER", "native_unavailable_reason", "native_module",
        "librdkafka_path", "librdkafka_config", "NativePartition")),
    "offset_ranges": Moved("airflow_kafka_stream.source.offset_ranges", (
        "MAX_RANGES_PER_TASK", "OffsetRange", "LostOffsets", "find_lost_offsets", "rate_limit", "plan_ranges",
        "group_ranges")),
    "offsets_text": Moved("airflow_kafka_stream.source.offsets_text", (
        "RUNNER_MODULE", "SparkText", "OffsetsJson", "install_in_runner")),
    "partition_polls": Moved("airflow_kafka_stream.source.partition_polls", (
        "HEADERS_TYPE", "Polled", "PartitionPolls", "ConfluentPartition", "records_to_batch")),
    "read_placement": Moved("airflow_kafka_stream.source.read_placement", (
        "MIB", "ReadPlacement", "read_placement")),
    "runtime": Moved("airflow_kafka_stream.runtime", (
        "EXIT_OK", "EXIT_FAILED", "StreamConfig", "RunResult", "StreamRuntime", "run_stream"), {
        "SOURCE_FORMAT": "airflow_kafka_stream.runtime.config",
        "START_LOCK_WAIT_SECONDS": "airflow_kafka_stream.runtime.takeover",
        "PROGRESS_GRACE_SECONDS": "airflow_kafka_stream.runtime.supervision",
        "LAG_SAMPLES": "airflow_kafka_stream.runtime.stream_runtime",
        "utc_now": "airflow_kafka_stream.runtime.stream_runtime",
        "offsets_equal": "airflow_kafka_stream.runtime.progress",
        "batch_end_offsets": "airflow_kafka_stream.runtime.progress",
        "batch_backlog": "airflow_kafka_stream.runtime.progress",
        "BatchProgress": "airflow_kafka_stream.runtime.stream_runtime",
        "progress_from_json": "airflow_kafka_stream.runtime.progress",
    }),
    "session": Moved("airflow_kafka_stream.runtime.session", (
        "local_session", "executor_count")),
    "source": Moved("airflow_kafka_stream.source.source", (
        "FORMAT_NAME", "register", "source_schema", "KafkaStreamDataSource"), {
        "placement_of": "airflow_kafka_stream.source.stream_reader",
        "KafkaRange": "airflow_kafka_stream.source.stream_reader",
        "parse_offsets": "airflow_kafka_stream.source.stream_reader",
        "KafkaStreamReader": "airflow_kafka_stream.source.stream_reader",
    }),
    "source_options": Moved("airflow_kafka_stream.source.source_options", (
        "SUBSCRIBE", "SUBSCRIBE_PATTERN", "ASSIGN", "DEFAULT_POLL_TIMEOUT_MS", "DEFAULT_CACHE_TIMEOUT_MS",
        "DEFAULT_MIN_RECORDS_PER_TASK", "DEFAULT_IDLE_POLL_INTERVAL_MS", "DEFAULT_DRIVER_READ_MAX_RECORDS",
        "DEFAULT_DRIVER_READ_MAX_BYTES", "READ_AUTO", "READ_ON_EXECUTORS", "READ_ON_DRIVER", "READ_MODES",
        "KNOWN_OPTIONS", "IGNORED_SPARK_OPTIONS", "REFUSED_OPTIONS", "REFUSED_KAFKA_OPTIONS", "Subscription",
        "StartingPosition", "SourceOptions", "parse_source_options"), {
        "START_EARLIEST": "airflow_kafka_stream.source.subscription",
        "START_LATEST": "airflow_kafka_stream.source.subscription",
        "START_GROUP": "airflow_kafka_stream.source.subscription",
        "START_OFFSETS": "airflow_kafka_stream.source.subscription",
        "START_TIMESTAMP": "airflow_kafka_stream.source.subscription",
        "START_TIMESTAMPS": "airflow_kafka_stream.source.subscription",
    }),
    "standby": Moved("airflow_kafka_stream.runtime.standby", (
        "GO_POLL_SECONDS", "utc_now", "Standby", "REHEARSAL_RECORDS", "rehearse"), {
        "EXECUTOR_GRACE_SECONDS": "airflow_kafka_stream.runtime.session",
    }),
}


def reexport(old_module: str, namespace: dict[str, Any]) -> list[str]:
    """Put the old module's names into ``namespace`` (its globals) from where they live now, warn the
    importer, and return the names for ``__all__``."""
    moved = MOVED[old_module.rsplit(".", 1)[1]]
    new = importlib.import_module(moved.module)
    namespace.update({name: getattr(new, name) for name in moved.names})
    for name, module in moved.elsewhere.items():
        namespace[name] = getattr(importlib.import_module(module), name)
    homes = sorted(set(moved.elsewhere.values()))
    also = f" ({', '.join(homes)} for {', '.join(sorted(moved.elsewhere))})" if homes else ""
    # stacklevel 3: past this function and the alias module, to the job that imports it (importlib's own
    # frames are skipped), so Python's default filter shows the warning to a job run as a script.
    warnings.warn(f"{old_module} is deprecated: import from {moved.module}{also}", DeprecationWarning,
                  stacklevel=3)
    return [*moved.names, *moved.elsewhere]
