"""Batches are planned and read at one isolation level: Spark's default (read_uncommitted, to the
high watermark), or read_committed (to the last stable offset) when kafka.isolation.level says so."""

from __future__ import annotations

import pytest
from confluent_kafka import IsolationLevel

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.kafka.clients import isolation_level
from airflow_kafka_stream.source.arrow_rows import consumer_config
from airflow_kafka_stream.source.source_options import parse_source_options


@pytest.mark.parametrize(
    "given, planned, read",
    [
        ({}, IsolationLevel.READ_UNCOMMITTED, "read_uncommitted"),
        ({"kafka.isolation.level": "read_committed"}, IsolationLevel.READ_COMMITTED, "read_committed"),
        ({"kafka.isolation.level": "READ_COMMITTED"}, IsolationLevel.READ_COMMITTED, "READ_COMMITTED"),
        ({"kafka.isolation.level": "read_uncommitted"}, IsolationLevel.READ_UNCOMMITTED, "read_uncommitted"),
    ],
)
def test_planner_and_reader_use_the_same_isolation_level(given, planned, read):
    options = parse_source_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", **given})
    client = {"bootstrap.servers": options.bootstrap_servers, **options.kafka}  # what the planner is given
    assert isolation_level(client) == planned
    assert consumer_config(options)["isolation.level"] == read


@pytest.mark.parametrize("level", ["read-committed", "committed", ""])
def test_an_isolation_level_kafka_lacks_is_refused_naming_both(level):
    with pytest.raises(InvalidInputError, match="kafka.isolation.level must be read_uncommitted .* or read_committed"):
        parse_source_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "kafka.isolation.level": level})


def test_the_old_import_from_metadata_still_works_with_a_warning():
    with pytest.warns(DeprecationWarning, match="import it from airflow_kafka_stream.kafka.clients"):
        from airflow_kafka_stream.kafka.metadata import isolation_level as old
    assert old is isolation_level
