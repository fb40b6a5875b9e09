"""Reading a checkpoint's position must not grow with the number of retained batches.

Synthesizes local checkpoints with 10 and 10,000 retained batches (offsets,
commits and their .crc files) and prints exactly one line:
``position_10000_vs_10: <median time with 10000 / median time with 10>`` (goal <= 2).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from smoke import count

from airflow_kafka_stream.checkpoint.reader import read_position

METADATA = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1795353621501,"conf":{"spark.sql.streaming.stateStore.providerClass":'
    '"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"}}'
)


LARGE = count(None, 10_000, 100)
RUNS = count(None, 200, 5)
WARMUP_RUNS = count(None, 20, 0)


def synthesize(root: str, batches: int) -> None:
    with open(os.path.join(root, "metadata"), "w") as handle:
        handle.write('{"id":"bench"}')
    for directory in ("offsets", "commits"):
        os.makedirs(os.path.join(root, directory))
    for batch in range(batches):
        offsets = f'v1\n{METADATA}\n{{"t":{{"0":{batch * 10},"1":{batch * 10}}}}}'
        for directory, text in (("offsets", offsets), ("commits", 'v1\n{"nextBatchWatermarkMs":0}')):
            with open(os.path.join(root, directory, str(batch)), "w") as handle:
                handle.write(text)
            with open(os.path.join(root, directory, f".{batch}.crc"), "wb") as handle:
                handle.write(b"crc\0\0\0\2\0\0\0\0\0")


def median_seconds(root: str, runs: int = 200) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        read_position(root)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as small, tempfile.TemporaryDirectory() as large:
        synthesize(small, 10)
        synthesize(large, LARGE)
        assert read_position(large).batch_id == LARGE - 1
        if WARMUP_RUNS:
            median_seconds(small, WARMUP_RUNS)  # warm up imports and caches
        ratio = median_seconds(large, RUNS) / median_seconds(small, RUNS)
    print(f"position_10000_vs_10: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
