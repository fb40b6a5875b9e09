"""Dead letters: records whose value cannot be deserialized go aside instead of failing the query.

A query that raises on a poison pill fails, restarts from its checkpoint, meets
the same record and fails again: a fail-restart loop that holds up every record
behind it. Here parsing never raises. :func:`parse_json_values` parses in the JVM
(``from_json``, PERMISSIVE, with a corrupt-record column) and adds an error
column; :func:`split_dead_letters` separates good rows from bad ones; a
:class:`DeadLetterSink` writes the bad ones with their topic, partition, offset,
raw value, error and time.

Writing to a path is idempotent per batch id (``<path>/batch=<id>``, overwritten),
so a batch that Spark re-runs after a crash does not duplicate dead letters.
Writing to a Kafka topic is at-least-once: a re-run batch produces its dead
letters again, with the same key ``topic:partition:offset`` to deduplicate on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Producer
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from airflow_kafka_stream.errors import InvalidInputError, KafkaAccessError

log = logging.getLogger(__name__)

ERROR_COLUMN = "dead_letter_error"
PARSED_COLUMN = "parsed"
_CORRUPT = "_corrupt_record"
#: Kafka metadata kept with every dead letter.
METADATA_COLUMNS = ("topic", "partition", "offset", "timestamp", "key")
KAFKA_SCHEME = "kafka://"


def parse_json_values(df, schema, required: Sequence[str] = (), value_column: str = "value",
                      options: Mapping[str, str] | None = None):
    """Add ``parsed`` (a struct of ``schema``) and ``dead_letter_error`` (null when the value is good).

    A value is bad when it is null, not JSON, not a JSON object, has a field
    whose type does not match ``schema``, or lacks one of the ``required`` fields.
    """
    unknown = [name for name in required if name not in schema.fieldNames()]
    if unknown:
        raise InvalidInputError(f"required field(s) {unknown} are not in the schema {schema.simpleString()}; "
                                "name fields of the schema")
    with_corrupt = StructType([*schema.fields, StructField(_CORRUPT, StringType())])
    parse_options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT, **(options or {})}
    raw = F.col(value_column).cast("string")
    parsed = F.from_json(raw, with_corrupt, parse_options)
    error = (
        F.when(F.col(value_column).isNull(), F.lit("value is null"))
        .when(F.col(PARSED_COLUMN).isNull(), F.lit("value is not a JSON object"))
        .when(F.col(f"{PARSED_COLUMN}.{_CORRUPT}").isNotNull(),
              F.lit(f"malformed JSON, or a field does not match the schema {schema.simpleString()}"))
    )
    for name in required:
        error = error.when(F.col(f"{PARSED_COLUMN}.{name}").isNull(), F.lit(f"required field {name!r} is missing"))
    return (df.withColumn(PARSED_COLUMN, parsed)
              .withColumn(ERROR_COLUMN, error)
              .withColumn(PARSED_COLUMN, F.col(PARSED_COLUMN).dropFields(_CORRUPT)))


def split_dead_letters(df, value_column: str = "value"):
    """(good rows, bad rows shaped as dead letters).

    Good rows keep the Kafka columns and the ``parsed`` struct (select ``parsed.*``
    or single fields: event fields may share names with Kafka's, e.g. ``key``).
    """
    good = df.where(F.col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN)
    bad = df.where(F.col(ERROR_COLUMN).isNotNull()).select(
        *[c for c in METADATA_COLUMNS if c in df.columns],
        F.col(value_column).alias("value"),
        F.col(ERROR_COLUMN).alias("error"),
        F.current_timestamp().alias("dead_lettered_at"),
    )
    return good, bad


class DeadLetterSink:
    """Where dead letters go: a directory (parquet or json files) or a Kafka topic."""

    def write(self, bad_df, batch_id: int) -> int:
        """Write a batch's dead letters; returns how many there were."""
        raise NotImplementedError

    @staticmethod
    def from_url(url: str, kafka_config: Mapping[str, Any] | None = None, file_format: str = "parquet"):
        """``kafka://<topic>`` for a topic (needs ``kafka_config``), anything else is a directory URL."""
        if not url:
            raise InvalidInputError("the dead-letter destination is empty: pass a directory or kafka://<topic>")
        if url.startswith(KAFKA_SCHEME):
            topic = url[len(KAFKA_SCHEME):].strip("/")
            if not topic or not (kafka_config or {}).get("bootstrap.servers"):
                raise InvalidInputError(
                    f"dead-letter destination {url!r} needs a topic name (kafka://my-dlq) and Kafka bootstrap servers"
                )
            return KafkaDeadLetters(topic, kafka_config or {})
        return PathDeadLetters(url, file_format)


class PathDeadLetters(DeadLetterSink):
    """Dead letters as files under ``<path>/batch=<id>/``, replaced when a batch runs again."""

    def __init__(self, path: str, file_format: str = "parquet"):
        if file_format not in ("parquet", "json"):
            raise InvalidInputError(f"dead-letter file format {file_format!r} is not supported: use parquet or json")
        self.path = path.rstrip("/")
        self.file_format = file_format

    def write(self, bad_df, batch_id: int) -> int:
        count = bad_df.count()
        if count:
            bad_df.write.mode("overwrite").format(self.file_format).save(f"{self.path}/batch={batch_id}")
            log.warning("batch %d: %d record(s) sent to dead letters at %s", batch_id, count, self.path)
        return count


class KafkaDeadLetters(DeadLetterSink):
    """Dead letters produced to a topic; key ``topic:partition:offset``, error details in headers."""

    def __init__(self, topic: str, kafka_config: Mapping[str, Any]):
        self.topic = topic
        self.kafka_config = dict(kafka_config)

    def write(self, bad_df, batch_id: int) -> int:
        rows = bad_df.collect()  # dead letters are rare; they fit on the driver
        if not rows:
            return 0

        producer = Producer({**self.kafka_config, "linger.ms": 5})
        failures: list[str] = []

        def delivered(err, _msg):
            if err is not None:
                failures.append(str(err))

        for row in rows:
            fields = row.asDict()
            headers = [
                ("dlq.topic", str(fields.get("topic")).encode()),
                ("dlq.partition", str(fields.get("partition")).encode()),
                ("dlq.offset", str(fields.get("offset")).encode()),
                ("dlq.error", str(fields.get("error")).encode()),
                ("dlq.batch", str(batch_id).encode()),
                ("dlq.at", datetime.now(UTC).isoformat().encode()),
            ]
            key = f"{fields.get('topic')}:{fields.get('partition')}:{fields.get('offset')}"
            producer.produce(self.topic, key=key.encode(), value=fields.get("value"), headers=headers,
                             on_delivery=delivered)
            producer.poll(0)
        remaining = producer.flush(60)
        if remaining or failures:
            raise KafkaAccessError(
                f"{remaining + len(failures)} dead letter(s) of batch {batch_id} could not be written to topic "
                f"{self.topic!r} ({'; '.join(failures[:3]) or 'timed out'}); the batch fails and is retried"
            )
        log.warning("batch %d: %d record(s) sent to dead-letter topic %s", batch_id, len(rows), self.topic)
        return len(rows)
