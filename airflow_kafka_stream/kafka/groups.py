"""Consumer group access: describe a group (state, protocol, members), alter or commit its offsets.

A group's offsets are a copy of the job's position for monitoring (the
checkpoint is the truth), so they are written from outside the group: the
admin API (``alter_group_offsets``) or a consumer that commits without joining
(``commit_offsets``). Kafka refuses both while members are in the group
(``UNKNOWN_MEMBER_ID``, per partition); that refusal becomes a JobStateError
saying which partitions changed and which did not. Spark assigns partitions
instead of joining, so an ``Empty`` group does not prove the job is stopped,
and any member :func:`describe_group` lists is a consumer that is not the job
(``core.consumer_group``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from airflow_kafka_stream.core.consumer_group import GroupDescription, GroupMember
from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition
from airflow_kafka_stream.errors import InvalidInputError, JobStateError, KafkaAccessError
from airflow_kafka_stream.kafka.clients import admin_client, bootstrap_servers
from airflow_kafka_stream.kafka.clients import consumer as new_consumer
from airflow_kafka_stream.kafka.metadata import check_partitions_exist

log = logging.getLogger(__name__)

#: Kafka's names for group states, as ``kafka-consumer-groups.sh --describe --state`` prints them.
_STATE_NAMES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "ASSIGNING": "Assigning",
    "RECONCILING": "Reconciling",
    "UNKNOWN": "Unknown",
}

#: Errors meaning "the group's coordinator is moving or loading": Kafka's clients ask again.
_COORDINATOR_MOVING = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
)

#: Errors meaning "members own this group right now".
_IN_USE_CODES = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.FENCED_INSTANCE_ID,
    }
)


def _check_group(group: str) -> None:
    if not group or not isinstance(group, str):
        raise InvalidInputError("a consumer group id is needed; set the job's kafka.group.id")


def describe_group(config: Mapping[str, object], group: str, timeout: float = 10.0) -> GroupDescription:
    """The group as its coordinator describes it: state, protocol and members (classic and KIP-848 groups alike).

    A group that never existed (or whose offsets expired) reads as Dead with no members.
    """
    _check_group(group)
    admin = admin_client(config)
    servers = bootstrap_servers(config)
    try:
        found = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout + 5)
    except (KafkaException, TimeoutError) as exc:
        raise KafkaAccessError(
            f"could not describe consumer group {group!r} at {servers}: {exc}; check that the brokers are "
            "reachable and that this principal may DESCRIBE the group"
        ) from exc
    name = getattr(getattr(found, "state", None), "name", "UNKNOWN")
    protocol = getattr(getattr(found, "type", None), "name", "UNKNOWN").lower()
    members = tuple(
        GroupMember(member_id=m.member_id, client_id=m.client_id or "", host=m.host or "",
                    group_instance_id=m.group_instance_id or None,
                    assignment=tuple(sorted(TopicPartition(tp.topic, tp.partition)
                                            for tp in getattr(m.assignment, "topic_partitions", None) or ())))
        for m in found.members or ()
    )
    return GroupDescription(group=group, state=_STATE_NAMES.get(name, name.title()), protocol=protocol,
                            members=members)


def group_state(config: Mapping[str, object], group: str, timeout: float = 10.0) -> str:
    """The group's state by Kafka's name (Stable, Empty, Dead, PreparingRebalance, ...): :func:`describe_group`'s."""
    return describe_group(config, group, timeout).state


def alter_group_offsets(
    config: Mapping[str, object], group: str, offsets: Mapping[TopicPartition, int], timeout: float = 10.0
) -> None:
    """Set the group's committed offsets with the admin API; the group must have no members.

    Raises JobStateError when members hold the group, KafkaAccessError for other
    refusals; both name the partitions that were and were not changed.
    """
    _check_group(group)
    wanted = _checked_offsets(offsets)
    check_partitions_exist(config, wanted, timeout)  # a broker may accept offsets for partitions it lacks
    admin = admin_client(config)
    deadline = time.monotonic() + timeout
    pending, backoff = dict(wanted), 0.1
    while True:
        request = ConsumerGroupTopicPartitions(group, _kafka_partitions(pending))
        try:
            answer = admin.alter_consumer_group_offsets([request], request_timeout=timeout)[group].result(timeout + 5)
        except KafkaException as exc:
            errors = {tp: exc.args[0] for tp in pending}
        except TimeoutError as exc:
            raise KafkaAccessError(
                f"altering the offsets of group {group!r} at {bootstrap_servers(config)} timed out after {timeout}s; "
                "some partitions may have changed: check with verify, then retry"
            ) from exc
        else:
            errors = {TopicPartition(k.topic, k.partition): k.error for k in answer.topic_partitions
                      if k.error is not None}
        moving = {tp for tp, err in errors.items() if err.code() in _COORDINATOR_MOVING}
        if not moving or moving != set(errors) or time.monotonic() + backoff > deadline:
            break
        # The group's coordinator is moving or loading (a broker restarted, the offsets topic is being created):
        # Kafka says to ask again, and only the partitions it refused for that reason.
        log.info("group %s: coordinator not ready (%s); asking again", group, next(iter(errors.values())).name())
        time.sleep(backoff)
        pending, backoff = {tp: wanted[tp] for tp in moving}, min(backoff * 2, 1.0)
    if errors:
        _raise_refusal(config, group, wanted, errors, "alter")
    log.info("set offsets of group %s for %d partitions", group, len(wanted))


def commit_offsets(
    config: Mapping[str, object], group: str, offsets: Mapping[TopicPartition, int], timeout: float = 10.0
) -> None:
    """Commit offsets for the group from a consumer that does not join it (no metadata lookups).

    What a job that assigns its partitions does after each batch: cheap, and
    refused like an alter while other members hold the group.
    """
    consumer = standalone_consumer(config, group)
    try:
        commit_through(consumer, config, group, offsets)
    finally:
        consumer.close()


def standalone_consumer(config: Mapping[str, object], group: str) -> Consumer:
    """A consumer that commits for ``group`` without ever joining it (it never subscribes)."""
    _check_group(group)
    return new_consumer(config, **{"group.id": group, "enable.auto.commit": False, "enable.auto.offset.store": False})


def commit_through(consumer, config: Mapping[str, object], group: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Commit ``offsets`` through a caller-owned standalone consumer (kept across commits by a running job).

    Raises JobStateError when members hold the group, KafkaAccessError for other
    refusals; both name the partitions that were and were not changed.
    """
    wanted = _checked_offsets(offsets)
    try:
        answer = consumer.commit(offsets=_kafka_partitions(wanted), asynchronous=False)
    except KafkaException as exc:
        _raise_refusal(config, group, wanted, {tp: exc.args[0] for tp in wanted}, "commit")
    _check_answer(config, group, wanted, answer or [], "commit")


def _checked_offsets(offsets: Mapping[TopicPartition, int]) -> PartitionOffsets:
    if not offsets:
        raise InvalidInputError("no offsets given; pass at least one partition and its offset")
    for tp, offset in offsets.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError(
                f"offset {offset!r} for {tp} is invalid: a committed offset is the next offset to read, >= 0"
            )
    return {TopicPartition(*tp): offsets[tp] for tp in sorted(offsets)}


def _kafka_partitions(offsets: PartitionOffsets) -> list[KafkaTopicPartition]:
    return [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]


def _check_answer(config, group: str, wanted: PartitionOffsets, answer, verb: str) -> None:
    errors = {TopicPartition(k.topic, k.partition): k.error for k in answer if k.error is not None}
    if errors:
        _raise_refusal(config, group, wanted, errors, verb)


def _raise_refusal(config, group: str, wanted: PartitionOffsets, errors: Mapping[TopicPartition, KafkaError],
                   verb: str) -> None:
    changed = [f"{tp}={offset}" for tp, offset in wanted.items() if tp not in errors]
    refused = [f"{tp} ({errors[tp].name()})" for tp in wanted if tp in errors]
    outcome = (
        f"changed: {', '.join(changed) or 'none'}; not changed: {', '.join(refused)}"
    )
    codes = {err.code() for err in errors.values()}
    if codes <= _IN_USE_CODES:
        raise JobStateError(
            f"Kafka refused to {verb} the offsets of consumer group {group!r}: the group is in use by a running "
            f"consumer ({outcome}); stop the job or consumer that uses the group (or wait for its session to "
            "expire), check that the group state is Empty, then retry"
        )
    raise KafkaAccessError(
        f"Kafka at {bootstrap_servers(config)} refused to {verb} the offsets of consumer group {group!r} ({outcome}); "
        "check that this principal may READ the group and the topics, then retry"
    )
