"""The text Spark stores for this source's offsets: the compact JSON of Spark's JVM Kafka connector.

PySpark's streaming source runner (``pyspark/sql/streaming/python_streaming_source_runner.py``,
the Python process that serves the driver's calls to a Python source) turns the dict a reader
returns into the string the JVM stores in ``offsets/N`` with a plain ``json.dumps``: spaces after
every ``,`` and ``:``. The JVM connector writes ``{"t":{"0":23,"1":31}}``, topics and partitions
sorted. So that a checkpoint looks the same whichever source wrote it, the runner's ``json`` name
is pointed at :class:`OffsetsJson` when this source's reader is created in that process (the
process serves this one source).

Spark decides whether a batch has new data by comparing offset *texts*. Were every offset
re-rendered, a checkpoint written in the old spaced form would differ from the same offsets
rendered compactly: one empty batch on resume, and a drained query would run that batch after
the runtime saw the drain. So :class:`OffsetsJson` remembers the exact text of every offsets
object Spark hands in and gives that text back when the reader returns the object unchanged
("no new data"); only offsets the reader made itself are rendered, compactly. Data and
positions are the same either way: every tool here parses offsets as JSON.

If a future PySpark no longer serves the source that way, nothing is patched and offsets keep
PySpark's spacing (still correct); a test compares the stored lines byte for byte.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

log = logging.getLogger(__name__)

RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"


class SparkText(dict):
    """Offsets as Spark handed them to the reader, with the exact text Spark holds for them."""

    text: str = ""


class OffsetsJson:
    """Stands in for the ``json`` module inside PySpark's streaming source runner (loads and dumps only)."""

    @staticmethod
    def loads(text: str | bytes) -> Any:
        value = json.loads(text)
        if isinstance(value, dict):
            value = SparkText(value)
            value.text = text if isinstance(text, str) else text.decode("utf-8")
        return value

    @staticmethod
    def dumps(value: Any) -> str:
        if isinstance(value, SparkText) and json.loads(value.text) == value:
            return value.text  # unchanged: Spark must see its own text, or it sees "new data"
        return json.dumps(value, separators=(",", ":"))


def install_in_runner() -> bool:
    """Make the streaming source runner of this process store offsets compactly; False when there is none."""
    for name in ("__main__", RUNNER_MODULE):
        module = sys.modules.get(name)
        if module is None or not hasattr(module, "latest_offset_admission_control_func"):
            continue
        current = getattr(module, "json", None)
        if current is OffsetsJson:
            return True
        if current is json:
            module.json = OffsetsJson
            log.debug("kafka_stream: offsets are stored as compact JSON (%s)", name)
            return True
    return False
