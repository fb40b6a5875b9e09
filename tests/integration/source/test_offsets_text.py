"""The text of the offsets the kafka_stream source leaves in a checkpoint: the compact, sorted JSON Spark's
JVM Kafka connector writes, and a checkpoint written in the older spaced form resumes exactly.

Spark compares offsets by their text to decide whether there is new data, so the spaced form (PySpark's
plain json.dumps, written by earlier versions of this source) must resume with no extra batch, no replay
and no loss. Real Spark and a real broker throughout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_kafka_stream.core.offsets import parse_offsets_json, render_offsets_json
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration


def run(spark, bootstrap: str, topics: list[str], checkpoint: Path) -> list[tuple[str, int, int]]:
    """One availableNow run; the (topic, partition, offset) it read."""
    got: list[tuple[str, int, int]] = []
    frame = (spark.readStream.format("kafka_stream").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", ",".join(topics)).option("startingOffsets", "earliest").load())
    query = (frame.writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
             .foreachBatch(lambda df, _id: got.extend((r.topic, r.partition, r.offset) for r in df.collect()))
             .start())
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return sorted(got)


def offsets_files(checkpoint: Path) -> dict[int, Path]:
    directory = checkpoint / "offsets"
    return {int(name): directory / name for name in os.listdir(directory) if name.isdigit()}


def source_line(path: Path) -> str:
    """The one source's offsets line of an offsets/N file (v1, metadata, then one line per source)."""
    lines = path.read_text().split("\n")
    assert lines[0] == "v1" and len(lines) == 3, lines
    return lines[2]


def fill(bootstrap: str, topic: str, counts: dict[int, int], prefix: str) -> None:
    for partition, count in counts.items():
        produce(bootstrap, topic, [(None, f"{prefix}{i}") for i in range(count)], partition=partition)


def test_fresh_checkpoint_lines_are_the_jvm_connectors_text(spark, kafka_bootstrap, tmp_path):
    """Two topics whose names sort differently from their creation order, and 11 partitions, so that
    both orders matter: topics sorted, partitions sorted numerically (10 after 9), no spaces."""
    zebra = create_topic(kafka_bootstrap, "z" + unique("text"), partitions=11)
    apple = create_topic(kafka_bootstrap, "a" + unique("text"), partitions=1)
    fill(kafka_bootstrap, zebra, {p: 1 for p in range(11)}, "z")
    fill(kafka_bootstrap, apple, {0: 2}, "a")
    checkpoint = tmp_path / "ckpt"
    assert len(run(spark, kafka_bootstrap, [zebra, apple], checkpoint)) == 13
    fill(kafka_bootstrap, zebra, {10: 1}, "later")
    assert run(spark, kafka_bootstrap, [zebra, apple], checkpoint) == [(zebra, 10, 1)]
    files = offsets_files(checkpoint)
    assert len(files) >= 2
    for batch, path in sorted(files.items()):
        line = source_line(path)
        assert line == render_offsets_json(parse_offsets_json(line)), f"offsets/{batch}: {line}"
    last = source_line(files[max(files)])
    assert last.startswith(f'{{"{apple}":{{"0":2}},"{zebra}":{{"0":1,"1":1,"2":1,')
    assert last.endswith('"9":1,"10":2}}')


def to_spaced_form(checkpoint: Path) -> None:
    """Rewrite every offsets/N line as earlier versions left it: PySpark's plain json.dumps of the same dict."""
    for path in offsets_files(checkpoint).values():
        head, _, line = path.read_text().rpartition("\n")
        path.write_text(f"{head}\n{json.dumps(json.loads(line))}")
        crc = path.with_name(f".{path.name}.crc")
        if crc.exists():
            crc.unlink()  # Hadoop verifies it on read; it would not match the rewritten bytes


def test_a_checkpoint_in_the_spaced_form_resumes_exactly(spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique("text-old"), partitions=2)
    fill(kafka_bootstrap, topic, {0: 3, 1: 2}, "x")
    checkpoint = tmp_path / "ckpt"
    assert len(run(spark, kafka_bootstrap, [topic], checkpoint)) == 5
    to_spaced_form(checkpoint)
    before = offsets_files(checkpoint)
    assert ", " in source_line(before[max(before)]) or ": " in source_line(before[max(before)])

    # Nothing new: the source hands Spark back its own (spaced) text, so no batch runs at all.
    assert run(spark, kafka_bootstrap, [topic], checkpoint) == []
    assert offsets_files(checkpoint) == before

    # New records: read exactly those (no replay of 0..2 / 0..1, nothing skipped), stored compactly.
    fill(kafka_bootstrap, topic, {0: 2, 1: 1}, "y")
    assert run(spark, kafka_bootstrap, [topic], checkpoint) == [(topic, 0, 3), (topic, 0, 4), (topic, 1, 2)]
    after = offsets_files(checkpoint)
    assert set(after) - set(before) == {max(before) + 1}
    assert source_line(after[max(after)]) == render_offsets_json(parse_offsets_json(f'{{"{topic}":{{"0":5,"1":3}}}}'))
