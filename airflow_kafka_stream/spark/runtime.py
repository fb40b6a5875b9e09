"""Deprecated alias of :mod:`airflow_kafka_stream.runtime`: import StreamConfig and StreamRuntime from there."""

import warnings

from airflow_kafka_stream.runtime import EXIT_FAILED, EXIT_OK, RunResult, StreamConfig, StreamRuntime, run_stream

__all__ = ["EXIT_FAILED", "EXIT_OK", "RunResult", "StreamConfig", "StreamRuntime", "run_stream"]

warnings.warn("airflow_kafka_stream.spark.runtime is deprecated: import from airflow_kafka_stream.runtime",
              DeprecationWarning, stacklevel=2)
