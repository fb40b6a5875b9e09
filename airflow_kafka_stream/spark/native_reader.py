"""Deprecated alias of :mod:`airflow_kafka_stream.source.native_reader`: import from there."""

from airflow_kafka_stream.spark._alias import reexport

__all__ = reexport(__name__, globals())
