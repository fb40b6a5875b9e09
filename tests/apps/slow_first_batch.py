"""The example pipeline whose first batch of each run takes ``SLOW_FIRST_BATCH_SECONDS`` (default 30) longer:
a fresh generation that pays for a cold cache or a backlog, slower than an upgrade's health window.

Takes the example pipeline's arguments, so a test launches it where the example pipeline would run.
"""

from __future__ import annotations

import os
import sys
import time

from airflow_kafka_stream.jobs import example_pipeline

SECONDS = float(os.environ.get("SLOW_FIRST_BATCH_SECONDS", "30"))
writer_of = example_pipeline.batch_writer


def slow_first_batch(runtime, output, dead_letters):
    write = writer_of(runtime, output, dead_letters)
    waited = []

    def first_slow(batch_df, batch_id: int) -> None:
        if not waited:  # before the batch commits: records keep arriving meanwhile
            waited.append(batch_id)
            time.sleep(SECONDS)
        write(batch_df, batch_id)

    return first_slow


if __name__ == "__main__":
    example_pipeline.batch_writer = slow_first_batch
    sys.exit(example_pipeline.main())
