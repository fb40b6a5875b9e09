"""Deprecated alias of :mod:`airflow_kafka_stream.source.source`: import register from there."""

import warnings

from airflow_kafka_stream.source.source import FORMAT_NAME, KafkaStreamDataSource, register, source_schema

__all__ = ["FORMAT_NAME", "KafkaStreamDataSource", "register", "source_schema"]

warnings.warn("airflow_kafka_stream.spark.source is deprecated: import from airflow_kafka_stream.source.source",
              DeprecationWarning, stacklevel=2)
