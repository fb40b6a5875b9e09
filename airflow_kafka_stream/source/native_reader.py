"""The C partition reader: binding it to librdkafka, and Arrow batches from the buffers it fills.

The extension ``_kafka_arrow`` (built from ``_kafka_arrow.c`` when the package is installed)
consumes one partition with librdkafka and copies keys, values, offsets and timestamps
straight into Arrow buffers, so no Python object is made per record. It uses the
librdkafka that confluent-kafka ships (or a system one when confluent-kafka was built
against it). When either is missing, :func:`native_module` returns None and
:func:`native_unavailable_reason` says why; the source then fails the task unless the user
allowed the Python fallback. Binding prints one line to the process's stderr (an
executor's log on a cluster), so which reader ran can be read there, not assumed.
"""

from __future__ import annotations

import ctypes.util
import glob
import logging
import os
import sys
from functools import cache
from types import ModuleType

import confluent_kafka
import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException

from airflow_kafka_stream.source.offset_ranges import OffsetRange
from airflow_kafka_stream.source.partition_polls import Polled

# Lazy imports: the C extension _kafka_arrow, optional (the package may be installed without it): its ImportError
# selects the Python reader.

log = logging.getLogger(__name__)

#: Largest key or value column of one Arrow batch; Arrow's binary offsets are 32-bit.
MAX_BATCH_BYTES = 256 * 1024 * 1024

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


#: The line an executor's log holds once a process has bound the C reader.
BOUND_MARKER = "kafka_stream: C reader bound to librdkafka"


def native_unavailable_reason() -> str | None:
    """Why :func:`native_module` is None in this process (None when the C reader is usable)."""
    return _bind()[1]


def native_module() -> ModuleType | None:
    """The extension bound to librdkafka, or None when it cannot be used (see :func:`native_unavailable_reason`)."""
    return _bind()[0]


@cache
def _bind() -> tuple[ModuleType | None, str | None]:
    try:
        from airflow_kafka_stream.source import _kafka_arrow
    except ImportError as exc:
        return _unavailable(f"the extension airflow_kafka_stream.source._kafka_arrow is not importable ({exc})")
    path = librdkafka_path()
    if path is None:
        return _unavailable("librdkafka was found neither in the confluent-kafka wheel nor on the system")
    try:
        version = _kafka_arrow.load(path)
    except ImportError as exc:
        return _unavailable(f"the extension cannot bind librdkafka at {path} ({exc})")
    print(f"{BOUND_MARKER} {version} at {path} (pid {os.getpid()}, {sys.executable})", file=sys.stderr, flush=True)
    return _kafka_arrow, None


def _unavailable(reason: str) -> tuple[None, str]:
    log.warning("kafka_stream: C reader unavailable: %s", reason)
    return None, reason


def librdkafka_path() -> str | None:
    """The librdkafka confluent-kafka uses: the copy in its wheel, else the system's."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    bundled = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    return bundled[0] if bundled else ctypes.util.find_library("rdkafka")


def librdkafka_config(config: dict[str, object]) -> dict[str, str]:
    """Client settings as librdkafka's strings (confluent-kafka does the same for its own clients)."""

    def text(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return {name: text(value) for name, value in config.items()}


class NativePartition:
    """One partition read by the C reader; the same polls as the confluent-kafka reader."""

    def __init__(self, module: ModuleType, config: dict[str, object], rng: OffsetRange, schema: pa.Schema) -> None:
        self._reader = module.PartitionReader(librdkafka_config(config), rng.topic, rng.partition, rng.start)
        self._topic = _string_scalar(rng.topic)
        self._partition = rng.partition
        self._schema = schema

    def poll(self, max_messages: int, timeout: float, end: int) -> Polled:
        (count, events, key_valid, key_nulls, key_offsets, key_data, value_valid, value_nulls, value_offsets,
         value_data, offsets, stamps, kinds, beyond) = self._reader.read(
            max_messages, int(timeout * 1000), end, MAX_BATCH_BYTES
        )  # fmt: skip
        errors = [(KafkaError(code, reason), offset) for code, offset, reason in events]
        if not count:
            return Polled(None, -1, -1, errors, beyond > 0)
        numbers = np.frombuffer(offsets, dtype=np.int64)
        columns = [
            _binary(count, key_valid, key_nulls, key_offsets, key_data),
            _binary(count, value_valid, value_nulls, value_offsets, value_data),
            pa.repeat(self._topic, count),
            _fixed_width(pa.int32(), count, np.full(count, self._partition, dtype=np.int32)),
            _fixed_width(pa.int64(), count, offsets),
            _fixed_width(TIMESTAMP_TYPE, count, stamps),
            _fixed_width(pa.int32(), count, kinds),
        ]
        batch = pa.RecordBatch.from_arrays(columns, schema=self._schema)
        return Polled(batch, int(numbers[0]), int(numbers[-1]), errors, beyond > 0)

    def watermarks(self, timeout: float) -> tuple[int, int]:
        code, low, high, text = self._reader.watermarks(int(timeout * 1000))
        if code:
            raise KafkaException(KafkaError(code, text))
        return low, high

    def cached_watermarks(self) -> tuple[int, int] | None:
        code, low, high = self._reader.cached_watermarks()
        return None if code else (low, high)

    def assign(self, start: int | None) -> None:
        self._reader.assign(start)

    def close(self) -> None:
        self._reader.close()


# Every column is made from buffers, never from Python objects: pyarrow imports pandas (about 0.2 s) the first
# time it converts Python values (pa.array, pa.scalar), a cost each new process would pay at its first read,
# the source's process after an upgrade's go among them.


def _string_scalar(text: str) -> pa.Scalar:
    data = text.encode("utf-8")
    offsets = np.array([0, len(data)], dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]


def _fixed_width(kind: pa.DataType, count: int, data) -> pa.Array:
    return pa.Array.from_buffers(kind, count, [None, pa.py_buffer(data)])


def _binary(count: int, valid: bytes | None, nulls: int, offsets: bytes, data: bytes) -> pa.Array:
    validity = pa.py_buffer(valid) if valid is not None else None
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )
