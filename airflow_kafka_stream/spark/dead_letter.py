"""Deprecated alias of :mod:`airflow_kafka_stream.runtime.dead_letter`: import dead letters from there."""

import warnings

from airflow_kafka_stream.runtime.dead_letter import (
    DeadLetterSink,
    KafkaDeadLetters,
    PathDeadLetters,
    parse_json_values,
    split_dead_letters,
)

__all__ = ["DeadLetterSink", "KafkaDeadLetters", "PathDeadLetters", "parse_json_values", "split_dead_letters"]

warnings.warn("airflow_kafka_stream.spark.dead_letter is deprecated: import from airflow_kafka_stream.runtime.dead_letter",
              DeprecationWarning, stacklevel=2)
