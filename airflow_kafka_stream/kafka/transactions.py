"""What Kafka says about transactions: a transactional id's start (refused with what it needs), and each partition's
last stable offset beside its high watermark."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import OffsetSpec

from airflow_kafka_stream.errors import KafkaAccessError, StreamError
from airflow_kafka_stream.kafka.clients import admin_client
from airflow_kafka_stream.kafka.metadata import list_topic_partitions

log = logging.getLogger(__name__)

#: A group coordinator that is loading, moving or not elected yet: librdkafka's committed() reports these once
#: (NOT_COORDINATOR was seen failing a sink's first read on a fresh cluster; its ``retriable()`` is False).
_COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE)


def stable_and_high(config: Mapping[str, object], topic: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """Per partition of ``topic``: (last stable offset, high watermark), from two ListOffsets requests."""
    partitions = list_topic_partitions(config, [topic], timeout=timeout).get(topic, 0)
    admin = admin_client(config)

    def latest(level: IsolationLevel) -> dict[int, int]:
        asked = {KafkaTopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        try:
            return {tp.partition: future.result(timeout).offset for tp, future in
                    admin.list_offsets(asked, isolation_level=level, request_timeout=timeout).items()}
        except KafkaException as exc:
            raise KafkaAccessError(f"the ends of output topic {topic} could not be read: {exc}") from exc

    stable, high = latest(IsolationLevel.READ_COMMITTED), latest(IsolationLevel.READ_UNCOMMITTED)
    return {p: (stable[p], high[p]) for p in sorted(high)}


def init_transactions(producer: Producer, transactional_id: str, marker_group: str, bootstrap: Any,
                      timeout: float) -> None:
    """``initTransactions`` of ``producer`` (whose id is ``transactional_id``): it fences every older producer of the
    id and aborts what they left open. A cluster that refuses (no transaction log, an ACL) fails with what a
    transactional sink needs of it."""
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        raise KafkaAccessError(f"the Kafka sink cannot use transactions on {bootstrap}: "
                               f"{exc.args[0] if exc.args else exc} (a transactional id needs the broker's "
                               "transaction log and, with ACLs, WRITE and DESCRIBE on transactional id "
                               f"{transactional_id}, and READ on the marker group {marker_group})") from None


def check_transactions(config: Mapping[str, Any], transactional_id: str, marker_group: str, topic: str,
                       timeout: float = 30.0) -> None:
    """Before a job with a transactional sink is launched: can it start its transactions and read its marker?

    It does what the job's driver does first (so it fences a driver of the job that is still there: call it only
    when a new one is about to start), with a shorter wait: a refusal names what the cluster lacks."""
    settings = {key: value for key, value in config.items() if not key.startswith("group.")}
    producer = Producer({**settings, "transactional.id": transactional_id, "log_level": 3})
    init_transactions(producer, transactional_id, marker_group, settings.get("bootstrap.servers"), timeout)
    producer.flush(1)
    consumer = Consumer({**settings, "group.id": marker_group, "enable.auto.commit": False, "log_level": 3})
    try:
        answered(lambda: consumer.committed([KafkaTopicPartition(topic, 0)], timeout), timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        raise StreamError(f"the Kafka sink cannot read its marker group {marker_group} on "
                          f"{settings.get('bootstrap.servers')}: {error} (with ACLs it needs READ and DESCRIBE on "
                          "that group)") from None
    finally:
        consumer.close()


def answered(request: Callable[[], Any], timeout: float) -> Any:
    """``request``'s answer, asked again while Kafka answers with a retriable error (its group coordinator is
    still loading or has moved: a fresh or failing-over cluster) for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return request()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            moving = isinstance(error, KafkaError) and (error.retriable() or error.code() in _COORDINATOR_MOVING)
            if not moving or time.monotonic() > deadline:
                raise
            log.info("Kafka answered %s; asking again", error)
            time.sleep(0.5)
