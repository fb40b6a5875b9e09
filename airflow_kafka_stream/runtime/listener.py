"""The py4j listener that hands the runtime each committed batch's progress, as one JSON string."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark import SparkContext
from pyspark.sql.streaming import StreamingQueryListener

from airflow_kafka_stream.runtime.progress import progress_from_json

log = logging.getLogger(__name__)


class BatchListener:
    """Receives Spark's progress events (after ``commits/N`` is written) for one query.

    PySpark's own listener turns each event into Python objects field by field, about fifty
    py4j round trips per batch (measured: ~10 ms of driver CPU a batch, the largest part of the
    runtime's cost). This one takes the progress as one JSON string and reads the few fields
    it needs.
    """

    def __init__(self, on_batch: Callable[[Any], None]):
        outer = self

        class ProgressJson:
            """Spark's Java listener interface, implemented over py4j."""

            def onQueryStarted(self, jevent):  # noqa: N802 - Spark's API
                pass

            def onQueryProgress(self, jevent):  # noqa: N802
                try:
                    outer.on_progress_json(jevent.progress().json())
                except Exception:  # a listener error must never disturb Spark's listener bus
                    log.exception("handling a progress event failed")

            def onQueryIdle(self, jevent):  # noqa: N802
                pass

            def onQueryTerminated(self, jevent):  # noqa: N802
                pass

            class Java:
                implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

        class Listener(StreamingQueryListener):
            """Registered through the public addListener; Spark calls ProgressJson."""

            @property
            def _jlistener(self):
                if not hasattr(self, "_jlistenerobj"):
                    self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(ProgressJson())
                return self._jlistenerobj

            def onQueryStarted(self, event):  # noqa: N802
                pass

            def onQueryProgress(self, event):  # noqa: N802
                pass

            def onQueryTerminated(self, event):  # noqa: N802
                pass

        self.on_batch = on_batch
        self.query_id: str | None = None
        self.listener = Listener()

    def on_progress_json(self, text: str) -> None:
        progress = progress_from_json(text)
        if self.query_id is not None and progress.id != self.query_id:
            return
        # Only executed batches time "commitOffsets", the write of commits/N.
        if "commitOffsets" not in progress.durationMs:
            return
        self.on_batch(progress)
