"""Read-only Kafka metadata: topics, partitions, watermarks, offsets for times, group commits.

Every function takes a confluent-kafka client config (at least ``bootstrap.servers``)
and makes a fixed number of broker requests whatever the number of partitions:
one metadata request, and batched ``ListOffsets`` / ``OffsetFetch`` calls.

Errors: :class:`InvalidInputError` for topics or partitions that do not exist,
:class:`KafkaAccessError` when the cluster cannot be reached or refuses. Config
values are never logged (they may hold credentials).

Topics are checked against the cluster's full topic list (one metadata request):
a broker with ``auto.create.topics.enable=true`` creates a topic that a metadata
request names, and asking whether a topic exists must never create it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Iterable, Iterator, Mapping

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicCollection,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.watermarks import ask_until_valid, time_lookup_problem, watermark_problem
from airflow_kafka_stream.errors import InvalidInputError, KafkaAccessError
from airflow_kafka_stream.kafka.clients import admin_client, bootstrap_servers, lookup_consumer
from airflow_kafka_stream.moved import moved_attributes

log = logging.getLogger(__name__)

#: librdkafka's "no offset" marker (committed offsets, offsets for times).
_NO_OFFSET = -1001
#: ListOffsets' special times: the log start offset and the end (high watermark, or LSO under read_committed).
EARLIEST, LATEST = -2, -1


def _reused(config: Mapping[str, object], cached, make):
    """A client for this config, reused across calls (a streaming source asks every trigger); made afresh when
    a setting's value cannot be a cache key."""
    bootstrap_servers(config)
    settings = tuple(sorted(config.items(), key=lambda item: str(item[0])))
    try:
        return cached(settings)
    except TypeError:  # an unhashable setting value: no caching
        return make(config)


def _admin(config: Mapping[str, object]) -> AdminClient:
    return _reused(config, _cached_admin, admin_client)


def _lookup(config: Mapping[str, object]) -> Consumer:
    """An offset-lookup consumer for this config (see :func:`~airflow_kafka_stream.kafka.clients.lookup_consumer`)."""
    return _reused(config, _cached_lookup, lookup_consumer)


def forget_clients() -> None:
    """Drop the reused clients (the next call connects afresh, as a new process would)."""
    _cached_admin.cache_clear()
    _cached_lookup.cache_clear()


@functools.lru_cache(maxsize=8)
def _cached_admin(settings: tuple[tuple[str, object], ...]) -> AdminClient:
    return admin_client(dict(settings))


@functools.lru_cache(maxsize=8)
def _cached_lookup(settings: tuple[tuple[str, object], ...]) -> Consumer:
    return lookup_consumer(dict(settings))


def _access_error(config: Mapping[str, object], what: str, exc: BaseException) -> KafkaAccessError:
    return KafkaAccessError(
        f"Kafka at {bootstrap_servers(config)} could not {what}: {exc}; check that the brokers are reachable from here, "
        "that bootstrap.servers is right and that the security settings (kafka.security.protocol, kafka.sasl.*) "
        "allow this client"
    )


def _all_topics(config: Mapping[str, object], timeout: float) -> dict[str, int]:
    """Every topic of the cluster with its partition count (one metadata request; never auto-creates)."""
    admin = _admin(config)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise _access_error(config, "list its topics", exc) from exc
    topics: dict[str, int] = {}
    for name, topic in metadata.topics.items():
        if topic.error is not None:
            if topic.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise KafkaAccessError(
                    f"not authorized to describe topic {name!r} at {bootstrap_servers(config)}; grant this principal "
                    "DESCRIBE and READ on the topic"
                )
            continue
        topics[name] = len(topic.partitions)
    return topics


def list_topic_partitions(
    config: Mapping[str, object],
    topics: Iterable[str] | None = None,
    pattern: str | None = None,
    timeout: float = 10.0,
) -> dict[str, int]:
    """Partition count per topic: the named ``topics``, those matching ``pattern``, or all of them.

    The pattern must match the whole topic name (as Kafka's pattern subscription does);
    internal topics (``__consumer_offsets``...) are never matched by a pattern.
    """
    if topics is not None and pattern is not None:
        raise InvalidInputError("give either topics or a pattern, not both")
    available = _all_topics(config, timeout)
    if pattern is not None:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise InvalidInputError(f"topic pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return {
            name: count
            for name, count in sorted(available.items())
            if not name.startswith("__") and regex.fullmatch(name)
        }
    if topics is None:
        return {name: count for name, count in sorted(available.items()) if not name.startswith("__")}
    wanted = sorted(set(topics))
    missing = [name for name in wanted if name not in available]
    if missing:
        raise InvalidInputError(
            f"topic(s) {', '.join(missing)} do not exist at {bootstrap_servers(config)}; create them first or fix the "
            f"topic names (existing topics: {_sample(available)})"
        )
    return {name: available[name] for name in wanted}


def _sample(names: Iterable[str], limit: int = 10) -> str:
    visible = sorted(name for name in names if not name.startswith("__"))
    text = ", ".join(visible[:limit])
    if len(visible) > limit:
        text += f", ... ({len(visible)} in all)"
    return text or "none"


def check_partitions_exist(
    config: Mapping[str, object], partitions: Iterable[TopicPartition], timeout: float = 10.0
) -> None:
    """Raise InvalidInputError naming the first topics/partitions that do not exist."""
    wanted = sorted(set(partitions))
    counts = list_topic_partitions(config, topics={tp.topic for tp in wanted}, timeout=timeout)
    bad = [tp for tp in wanted if tp.partition < 0 or tp.partition >= counts[tp.topic]]
    if bad:
        detail = ", ".join(f"{tp} (topic has {counts[tp.topic]} partitions)" for tp in bad[:10])
        raise InvalidInputError(f"partition(s) {detail} do not exist; use partitions 0..n-1 of each topic")


def _list_offsets(
    client: Consumer, config: Mapping[str, object], specs: Mapping[TopicPartition, int], timeout: float, what: str
) -> dict[TopicPartition, int]:
    """One batched ListOffsets (a request per leader): per partition the offset for its time (ms), or for
    :data:`EARLIEST` / :data:`LATEST`; -1 where no record is at or after the time.

    Raises LeaderMoving when a leader is moving or unknown (ask again, with a client of fresh metadata),
    InvalidInputError for a partition that does not exist, KafkaAccessError for the rest.
    """
    if not specs:
        return {}
    request = [KafkaTopicPartition(tp.topic, tp.partition, spec) for tp, spec in specs.items()]
    try:
        answer = client.offsets_for_times(request, timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        # No answer in time: a leader died and the controller has not moved its partitions yet (seconds).
        if error is not None and (_leader_moving(error) or error.code() == KafkaError._TIMED_OUT):
            raise LeaderMoving(f"{what}: {error.name()}") from exc
        with contextlib.suppress(KafkaAccessError):  # the cluster is unreachable: report the request's failure
            check_partitions_exist(config, list(specs), timeout)
        raise _access_error(config, what, exc) from exc
    offsets: dict[TopicPartition, int] = {}
    for ktp in answer:
        tp = TopicPartition(ktp.topic, ktp.partition)
        if ktp.error is None:
            offsets[tp] = ktp.offset
        elif _leader_moving(ktp.error):
            raise LeaderMoving(f"{what} ({tp}): {ktp.error.name()}")
        else:
            if ktp.error.code() in _UNKNOWN_PARTITION:
                check_partitions_exist(config, list(specs), timeout)
            raise _access_error(config, f"{what} ({tp})", KafkaException(ktp.error))
    return offsets


class LeaderMoving(KafkaAccessError):
    """Kafka answered "ask again": a partition's leader is moving (a broker died, restarted or was replaced)."""


#: Errors with which Kafka says a partition's leader is moving or not yet known: its own clients ask again once
#: their metadata is fresh (Spark's connector retries its offset requests likewise).
_LEADER_MOVING = frozenset(
    {
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._DESTROY_BROKER,  # the consumer's lookup, when the leader's broker left the metadata
    }
)


#: The broker's and librdkafka's own "no such partition".
_UNKNOWN_PARTITION = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                                KafkaError._UNKNOWN_TOPIC})


def _leader_moving(error: KafkaError) -> bool:
    """Kafka's or librdkafka's "ask again": a leader moving or unknown, or an error it calls retriable."""
    return error.code() in _LEADER_MOVING or error.retriable()


class _Clients:
    """The lookup consumer a retried lookup asks through: the caller's or the one kept for its config, replaced
    by a new one when Kafka says a leader moved: a client keeps its metadata (the old leader) until it refreshes
    it, and a new client starts from fresh metadata (measured: "leader not available" answered for seconds after
    the leader was back, until a new client asked)."""

    def __init__(self, config: Mapping[str, object], client: Consumer | None = None) -> None:
        self._config = config
        self._client = client or _lookup(config)

    @contextlib.contextmanager
    def renewed_when_leaders_move(self) -> Iterator[Consumer]:
        try:
            yield self._client
        except LeaderMoving:
            forget_clients()
            self._client = _lookup(self._config)
            raise


def watermarks(
    config: Mapping[str, object],
    partitions: Iterable[TopicPartition],
    timeout: float = 10.0,
    *,
    retry_for: float | None = None,
    client: Consumer | None = None,
) -> dict[TopicPartition, tuple[int, int]]:
    """(low, high) watermark per partition: the first offset still stored and the next offset to be written.

    An answer that is no watermark (a librdkafka marker such as -1001, or an end below the
    start) is asked again for up to ``retry_for`` seconds (default ``timeout``), then
    reported as KafkaAccessError: it must never be read as data loss. ``client`` is the caller's own
    :func:`lookup_consumer` (else one kept for this process and config).
    """
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    clients = _Clients(config, client)

    def ask(pending: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        with clients.renewed_when_leaders_move() as asking:
            low = _list_offsets(asking, config, dict.fromkeys(pending, EARLIEST), timeout, "list watermarks")
            high = _list_offsets(asking, config, dict.fromkeys(pending, LATEST), timeout, "list watermarks")
        return {tp: (low[tp], high[tp]) for tp in pending}

    budget = timeout if retry_for is None else retry_for
    found = ask_until_valid(ask, wanted, watermark_problem, budget, f"list the watermarks at {bootstrap_servers(config)}",
                            retry_on=(LeaderMoving,))
    return {tp: found[tp] for tp in wanted}


def topic_ids(config: Mapping[str, object], topics: Iterable[str], timeout: float = 10.0) -> dict[str, str]:
    """Each topic's id (it changes when a topic is deleted and created again), in one request;
    topics that do not exist (any more) are left out."""
    wanted = sorted(set(topics))
    if not wanted:
        return {}
    admin = _admin(config)
    try:
        futures = admin.describe_topics(TopicCollection(wanted), request_timeout=timeout)
    except KafkaException as exc:
        raise _access_error(config, "describe topics", exc) from exc
    found: dict[str, str] = {}
    for name, future in futures.items():
        try:
            found[name] = str(future.result(timeout + 5).topic_id)
        except KafkaException as exc:
            if exc.args and getattr(exc.args[0], "code", lambda: None)() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise _access_error(config, f"describe topic {name!r}", exc) from exc
        except TimeoutError as exc:
            raise _access_error(config, f"describe topic {name!r} within {timeout}s", exc) from exc
    return found


def offsets_for_timestamps(
    config: Mapping[str, object], timestamps: Mapping[TopicPartition, int], timeout: float = 10.0,
    *, ends: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, int]:
    """First offset whose record timestamp is >= the given time (ms) per partition; the high watermark when none.

    Kafka answers ListOffsets for a time exactly (to the millisecond, from the time index), and -1 when no record
    is at or after the time: that resolves to the high watermark. ``ends`` are high watermarks the caller read just
    before (a reset plan reads every partition's watermarks anyway): given, they stand in for a second lookup, and
    an offset Kafka found past them (a record appended since) is kept. A high read before the time lookup can only
    make "no record at or after the time" replay records appended meanwhile (older than the time), never skip one.
    """
    wanted = dict(sorted(timestamps.items()))
    if not wanted:
        return {}
    for tp, ts in wanted.items():
        if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
            raise InvalidInputError(f"timestamp for {tp} must be milliseconds since the epoch (>= 0), got {ts!r}")
    missing = [tp for tp in wanted if ends is not None and tp not in ends]
    if missing:
        raise ValueError(f"ends must give every partition's high watermark; missing {missing}")
    clients = _Clients(config)

    def ask(pending: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        with clients.renewed_when_leaders_move() as asking:
            what = "look up offsets for times"
            by_time = _list_offsets(asking, config, {tp: wanted[tp] for tp in pending}, timeout, what)
            high = ends if ends is not None else _list_offsets(asking, config, dict.fromkeys(pending, LATEST),
                                                                 timeout, what)
        return {tp: (by_time[tp], high[tp]) for tp in pending}

    found = ask_until_valid(
        ask, list(wanted), time_lookup_problem, timeout, f"look up offsets for times at {bootstrap_servers(config)}",
        retry_on=(LeaderMoving,),
    )
    if ends is not None:
        return {tp: (end if offset < 0 else offset) for tp, (offset, end) in found.items()}
    return {tp: (end if offset < 0 or offset >= end else offset) for tp, (offset, end) in found.items()}


def committed_offsets(
    config: Mapping[str, object], group: str, partitions: Iterable[TopicPartition], timeout: float = 10.0,
    *, known_to_exist: bool = False,
) -> dict[TopicPartition, int | None]:
    """The group's committed offset per partition (the next offset to read); None where it has none.

    ``known_to_exist`` skips the existence check (one more metadata request) when the
    caller took the partitions from the cluster's own topic list.
    """
    if not group:
        raise InvalidInputError("a consumer group id is needed to read committed offsets; set kafka.group.id")
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    if not known_to_exist:
        check_partitions_exist(config, wanted, timeout)
    admin = _admin(config)
    request = ConsumerGroupTopicPartitions(group, [KafkaTopicPartition(tp.topic, tp.partition) for tp in wanted])
    try:
        futures = admin.list_consumer_group_offsets([request], request_timeout=timeout)
        answer = futures[group].result(timeout + 5)
    except (KafkaException, TimeoutError) as exc:
        raise _access_error(config, f"read the committed offsets of group {group!r}", exc) from exc
    result: dict[TopicPartition, int | None] = dict.fromkeys(wanted)
    for ktp in answer.topic_partitions:
        if ktp.error is not None:
            raise KafkaAccessError(
                f"Kafka at {bootstrap_servers(config)} refused the committed offset of group {group!r} for "
                f"{ktp.topic}:{ktp.partition}: {ktp.error}; check the group's ACLs (DESCRIBE on the group)"
            )
        tp = TopicPartition(ktp.topic, ktp.partition)
        if tp in result:
            # -1001 here is librdkafka's documented "the group has no commit", not an invalid answer.
            result[tp] = ktp.offset if ktp.offset >= 0 else None
    return result


#: ``isolation_level`` moved to ``kafka.clients`` (the lookup consumer needs it there).
__getattr__ = moved_attributes(__name__, {"isolation_level": "airflow_kafka_stream.kafka.clients:isolation_level"})
