"""A version whose query, started ahead of its standby's go, has a source that never answers.

The example pipeline, with one difference: the Python process that serves its source to Spark hangs before the
source comes up when the query was started ahead of a go (its binding file still waiting), as one that never
connected back to Spark on a loaded machine. Its rehearsal, which binds the source at once, runs normally. A
standby of it must not report READY; it gives up after ``standby_source_answer_seconds`` (15 s here) and the
upgrade ends before the running version is stopped.

Takes the example pipeline's arguments, so a test submits it where the example pipeline would run.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time

from airflow_kafka_stream.jobs import example_pipeline
from airflow_kafka_stream.source.binding import PENDING_KEY, WAITING, binding_path
from airflow_kafka_stream.source.source import KafkaStreamDataSource

ANSWER_SECONDS = 15.0


def _waiting(path: str) -> bool:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle).get(PENDING_KEY) == WAITING


class SilentKafkaStreamDataSource(KafkaStreamDataSource):
    """Defined in ``__main__``, so Spark's Python process gets this class by value, not by import."""

    def streamReader(self, schema):  # noqa: N802 - Spark's name
        path = binding_path(self.options)
        parent = os.getppid()
        while path and _waiting(path) and os.getppid() == parent:  # hung until the start ahead is let go
            time.sleep(0.2)
        return super().streamReader(schema)


def spark_session(cores: str):
    spark = _spark_session(cores)
    spark.dataSource.register(SilentKafkaStreamDataSource)  # replaces kafka_stream in this session
    return spark


_spark_session = example_pipeline.spark_session
example_pipeline.spark_session = spark_session
example_pipeline.StreamConfig = functools.partial(example_pipeline.StreamConfig,
                                                  standby_source_answer_seconds=ANSWER_SECONDS)

if __name__ == "__main__":
    sys.exit(example_pipeline.main())
