"""An idle query's looks at the topics are paced (``idlePollIntervalMs``), against the real broker.

Spark asks a source for its latest offsets every 10 ms while nothing new arrives; each look is a
ListOffsets request and a read of the drain path. After a look that found nothing new the next one waits
out the interval; a look that found records leaves the next one unpaced, so a busy stream is never slowed.
"""

from __future__ import annotations

import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from airflow_kafka_stream.source.source_options import parse_source_options
from airflow_kafka_stream.source.stream_reader import KafkaStreamReader
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


class Looks:
    """Calls latestOffset as Spark does; each answer with the seconds since the previous look ended."""

    def __init__(self) -> None:
        self.last_end = time.monotonic()

    def __call__(self, reader: KafkaStreamReader, start: dict) -> tuple[dict, float]:
        end = reader.latestOffset(start, ReadAllAvailable())
        now = time.monotonic()
        since, self.last_end = now - self.last_end, now
        return end, since


def test_looks_after_an_idle_one_wait_out_the_interval_and_busy_ones_do_not(kafka_bootstrap):
    topic = create_topic(kafka_bootstrap, unique("idle-pace"), 1)
    produce(kafka_bootstrap, topic, [(None, "a")], partition=0)
    options = {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic, "idlePollIntervalMs": "1500"}
    reader = KafkaStreamReader(parse_source_options(options))
    at_end = {topic: {"0": 1}}
    timed_look = Looks()

    first, _ = timed_look(reader, {topic: {"0": 0}})
    assert first == at_end
    idle, took = timed_look(reader, at_end)
    assert idle == at_end and took < 1.4, "the first idle look is not paced either"
    again, took = timed_look(reader, at_end)
    assert again == at_end and took >= 1.5, "a look right after an idle one waits out the interval"

    produce(kafka_bootstrap, topic, [(None, "b")], partition=0)
    found, took = timed_look(reader, at_end)
    assert found == {topic: {"0": 2}} and took >= 1.5, "still paced: the look before it found nothing"
    _, took = timed_look(reader, found)
    assert took < 1.4, "after a look that found a record, the next one goes at once"

    unpaced = KafkaStreamReader(parse_source_options({**options, "idlePollIntervalMs": "0"}))
    timed_look(unpaced, found)
    _, took = timed_look(unpaced, found)
    assert took < 1.4, "idlePollIntervalMs=0 asks as often as Spark does"
