"""The ``kafka_stream`` source's planner and reader: micro-batches planned from Kafka's watermarks on the driver,
read as Arrow batches on executors (or by ``driver_reader`` on the driver).

The reader object lives twice: one long-lived instance on the driver plans batches
(``initialOffset``/``latestOffset``/``partitions``), and a fresh copy per batch reads on
executors (``read``). Neither opens connections in ``__init__`` nor shares state.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition, to_nested
from airflow_kafka_stream.errors import DataLossError, KafkaAccessError
from airflow_kafka_stream.kafka import metadata
from airflow_kafka_stream.source import arrow_rows, worker_heap
from airflow_kafka_stream.source.control_files import (
    record_skipped,
    stop_requested,
    write_drained,
    write_start_offsets,
)
from airflow_kafka_stream.source.native_reader import native_unavailable_reason
from airflow_kafka_stream.source.offset_ranges import (
    OffsetRange,
    find_lost_offsets,
    group_ranges,
    plan_ranges,
    rate_limit,
)
from airflow_kafka_stream.source.read_placement import ReadPlacement, read_placement
from airflow_kafka_stream.source.source_options import READ_AUTO, SourceOptions
from airflow_kafka_stream.source.start_position import resolve_start
from airflow_kafka_stream.source.subscription import (
    ASSIGN,
    SUBSCRIBE_PATTERN,
)

log = logging.getLogger(__name__)


def planning_config(options: SourceOptions) -> dict[str, object]:
    """The settings of the client that plans batches (kafka.metadata keeps one per settings, for the run)."""
    return {"bootstrap.servers": options.bootstrap_servers, **options.kafka}


def placement_of(options: SourceOptions) -> ReadPlacement:
    """Where this process's query reads its batches (the C reader's presence decides readMode=auto's
    fallback, so it is looked at only then)."""
    missing = None
    if options.read_mode == READ_AUTO and options.native_reader and not options.include_headers:
        missing = native_unavailable_reason()
    return read_placement(options, missing)


class KafkaRange(InputPartition):
    """One Spark task: offset ranges ``[start, end)`` of Kafka partitions (one, or several small ones,
    see offset_ranges.group_ranges), and their topics' ids when planned (a kept consumer serves only
    the topic it was made for, see consumer_cache.py)."""

    def __init__(self, ranges: Sequence[OffsetRange], topic_ids: Mapping[str, str] | None = None) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)
        self.topic_ids = dict(topic_ids or {})


def parse_offsets(offsets: Mapping) -> PartitionOffsets:
    """Offsets as Spark hands them back (the nested dict this source returned)."""
    return {TopicPartition(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from Kafka watermarks and reads them as Arrow batches."""

    def __init__(self, options: SourceOptions, task_slots: int | None = None) -> None:
        self.options = options
        #: A local session's cores (None: a task per partition, as Spark's Kafka source reads).
        self.task_slots = task_slots
        self._available_now_target: PartitionOffsets | None = None
        self._latest_seen: PartitionOffsets | None = None
        self._drained_at: dict | None = None
        self._idle_since: float | None = None  # when a look last found nothing new (monotonic)
        self._client_config = planning_config(options)
        #: Watermarks known without asking the broker (the driver's kept consumers, see driver_reader.py);
        #: planning takes them when they cover every partition and show new records.
        self.known_watermarks: Callable[[list[TopicPartition]], dict | None] | None = None

    def __getstate__(self) -> dict:
        """Pickled for Spark's tasks, which plan nothing: without the driver's watermark source."""
        return {**self.__dict__, "known_watermarks": None}

    # -- start position ---------------------------------------------------------------------

    def initialOffset(self) -> dict:
        partitions = self._current_partitions(strict=True)
        bounds = self._watermarks(partitions)
        start = resolve_start(self.options, self._client_config, partitions, bounds)
        log.info("kafka_stream starts fresh (%s) at %s", self.options.starting.kind, json.dumps(to_nested(start)))
        if self.options.start_offsets_path:
            write_start_offsets(self.options.start_offsets_path, to_nested(start), self.options.starting.kind)
        return to_nested(start)

    # -- planning -------------------------------------------------------------------------

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # Not strict: this also runs on restarts, where a vanished topic is data loss for latestOffset to report.
        partitions = self._current_partitions(strict=False)
        bounds = self._watermarks(partitions)
        self._available_now_target = {tp: high for tp, (_low, high) in bounds.items()}
        log.info("kafka_stream availableNow: reading up to %s", json.dumps(to_nested(self._available_now_target)))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._pace_idle_looks()
        if stop_requested(self.options.drain_path):
            return self._drained(start)
        # A withdrawn request: plan again, and answer afresh should a new one come at this same position.
        self._drained_at = None
        begin = parse_offsets(start)
        partitions = self._current_partitions(strict=False)
        known = self.known_watermarks(partitions) if self.known_watermarks is not None else None
        end = self._plan(begin, partitions, known, limit) if known is not None else begin
        if end == begin:  # nothing new by what the consumers last saw: the broker has the last word
            end = self._plan(begin, partitions, self._watermarks(partitions), limit)
        if end == begin:
            self._idle_since = time.monotonic()
            return start  # Spark's own object: its text goes back unchanged (see offsets_text)
        if stop_requested(self.options.drain_path):  # asked while Kafka answered: no batch more to drain
            return self._drained(start)
        self._idle_since = None
        return to_nested(end)

    def _drained(self, start: dict) -> dict:
        """A stop request stands: plan nothing new and answer "drained" at ``start``."""
        if self._drained_at != start:  # once per position: the check repeats every trigger
            write_drained(self.options.drain_path, start)
            self._drained_at = start
        self._idle_since = time.monotonic()
        return start

    def _plan(self, begin: PartitionOffsets, partitions: list[TopicPartition],
              bounds: Mapping[TopicPartition, tuple[int, int]], limit: ReadLimit) -> PartitionOffsets:
        """The batch's end offsets from ``bounds`` (watermarks), the read limit and availableNow's target."""
        effective = self._check_lost(begin, bounds)
        end = {tp: bounds[tp][1] for tp in partitions}
        self._latest_seen = dict(end)
        if self._available_now_target is not None:
            end = {
                tp: min(high, max(effective[tp], self._available_now_target.get(tp, effective[tp])))
                for tp, high in end.items()
            }
        if self.options.end_offsets is not None:  # a rehearsal reads a bounded stretch
            end = {tp: max(effective[tp], min(high, self.options.end_offsets.get(tp, effective[tp])))
                   for tp, high in end.items()}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(effective, end, limit.max_rows)
        return end

    def _pace_idle_looks(self) -> None:
        """After a look that found nothing new, wait out ``idlePollIntervalMs`` before the next one.

        With the default trigger Spark asks an idle source again every 10 ms: each look is a ListOffsets
        request to the broker and a read of the drain path (an object-store request on S3), 100 a second
        per idle query and a fifth of a core. A record that arrives meanwhile waits at most the interval.
        """
        if self._idle_since is None:
            return
        wait = self._idle_since + self.options.idle_poll_interval_ms / 1000 - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def partitions_seen(self) -> list[TopicPartition]:
        """The partitions the last look at the topics found (empty before the first)."""
        return list(self._latest_seen or {})

    def reportLatestOffset(self) -> dict | None:
        return to_nested(self._latest_seen) if self._latest_seen else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = parse_offsets(start), parse_offsets(end)
        odd = [tp for tp in finish if tp not in begin or begin[tp] > finish[tp]]
        if odd:
            # New partitions start at earliest; a partition whose end went backwards (recreated
            # topic) restarts at its earliest, as latestOffset already accepted (failOnDataLoss=false).
            bounds = self._watermarks(odd)
            self._check_lost({tp: begin[tp] for tp in odd if tp in begin}, bounds)
            begin = {**begin, **{tp: bounds[tp][0] for tp in odd}}
        opts = self.options
        ranges = plan_ranges(begin, finish, opts.min_partitions, opts.max_records_per_partition)
        if opts.min_partitions or opts.max_records_per_partition:
            tasks = [(rng,) for rng in ranges]  # the user chose the parallelism
        else:
            tasks = group_ranges(ranges, opts.min_records_per_task, self.task_slots)
        ids = self._topic_ids({rng.topic for rng in ranges}) if opts.consumer_cache and ranges else {}
        return [KafkaRange(task, {r.topic: ids[r.topic] for r in task if r.topic in ids}) for task in tasks]

    def read(self, partition: KafkaRange) -> Iterator:
        worker_heap.settle()
        for rng in partition.ranges:
            yield from arrow_rows.read_range(self.options, rng, partition.topic_ids.get(rng.topic))

    def commit(self, end: dict) -> None:
        """Nothing to do: group offsets are committed by the job runtime after Spark's own commit."""

    def stop(self) -> None:
        """The query stopped: let go of the planning client. Planning uses one admin client per query
        (kafka.metadata keeps it between batches), each request bounded by a timeout."""
        metadata.forget_clients()

    # -- helpers ----------------------------------------------------------------------------

    def _current_partitions(self, strict: bool) -> list[TopicPartition]:
        """The partitions the subscription covers now (one metadata request).

        ``strict`` (a fresh start) refuses named topics or partitions that do not exist; otherwise
        they are left out, and offsets the query holds for them are reported as data loss.
        """
        sub = self.options.subscription
        if sub.kind == SUBSCRIBE_PATTERN:
            counts = metadata.list_topic_partitions(self._client_config, pattern=sub.pattern)
            return sorted(TopicPartition(t, p) for t, n in counts.items() for p in range(n))
        if strict and sub.kind == ASSIGN:
            metadata.check_partitions_exist(self._client_config, sub.partitions)
            return list(sub.partitions)
        if strict:
            counts = metadata.list_topic_partitions(self._client_config, topics=sub.topics)
            return sorted(TopicPartition(t, p) for t, n in counts.items() for p in range(n))
        counts = metadata.list_topic_partitions(self._client_config)
        if sub.kind == ASSIGN:
            return [tp for tp in sub.partitions if tp.partition < counts.get(tp.topic, 0)]
        return sorted(TopicPartition(t, p) for t in sub.topics if t in counts for p in range(counts[t]))

    def _watermarks(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """Watermarks to plan from; invalid answers (e.g. -1001 under broker overload) are asked again
        for up to kafkaConsumer.pollTimeoutMs, then fail as a Kafka error, never as data loss."""
        return metadata.watermarks(self._client_config, partitions, retry_for=self.options.poll_timeout_ms / 1000.0)

    def _topic_ids(self, topics: set[str]) -> dict[str, str]:
        """The topics' ids for the executors' consumer cache; none (no reuse this batch) when asking fails,
        since reuse is an optimisation and must never fail a batch."""
        try:
            return metadata.topic_ids(self._client_config, topics)
        except KafkaAccessError as exc:
            log.warning("kafka_stream: no topic ids for this batch, its tasks open new consumers: %s", exc)
            return {}

    def _check_lost(
        self, begin: PartitionOffsets, bounds: Mapping[TopicPartition, tuple[int, int]]
    ) -> PartitionOffsets:
        """Start offsets to plan from: ``begin`` where Kafka still has it, else (failOnDataLoss=false) earliest."""
        effective = {tp: low for tp, (low, _high) in bounds.items()}  # new partitions: earliest
        effective.update({tp: o for tp, o in begin.items() if tp in bounds})
        for lost in find_lost_offsets(begin, bounds):
            message = arrow_rows.data_loss_message(str(lost.tp), lost.start, None, lost.low, lost.high, lost.reason)
            if self.options.fail_on_data_loss:
                raise DataLossError(message)
            log.warning("%s", message)
            if lost.tp in bounds:
                effective[lost.tp] = lost.resume_at
            record_skipped(self.options.drain_path, str(lost.tp), lost.start,
                                         effective.get(lost.tp, lost.start), lost.reason)
        return effective

