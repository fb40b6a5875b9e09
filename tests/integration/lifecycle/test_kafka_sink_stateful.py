"""The transactional Kafka sink under a job of a user's own: running totals per key over two topics (a stateful
aggregation, ``tests/apps/totals_to_topic.py``), killed with ``kill -9`` inside a batch's transaction and again
after the batch's Kafka commit but before Spark's.

The second crash is the one a stateful query makes hard: Spark runs the batch again on restart, the sink finds it
committed and writes nothing, and the batch's state must still be the state the next batch builds on. The output
tells: each batch writes the totals of the keys it changed, so a key's records count up, one written twice (or a
total computed from lost state) breaks the count, and the last one is the key's total over both topics.

Then the job is stopped with a savepoint and restored from it dropping its state: the new generation's totals
start again from zero, and are all written (the older generation's batch marker skips none of them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.airflow.test_airflow_upgrade import APPS
from tests.integration.cli_helpers import run as run_cli
from tests.integration.lifecycle.test_exactly_once import Pipeline, pipelines  # noqa: F401 - a fixture
from tests.integration.lifecycle.test_kafka_sink import KEYS, NumberedFeed, open_partitions, read_topic
from tests.kafka_utils import create_topic, produce, unique

pytestmark = pytest.mark.integration

PARTITIONS = 2


def test_running_totals_over_two_topics_survive_kill_9_and_a_drop_state_restore(kafka_bootstrap, tmp_path,
                                                                               pipelines):  # noqa: F811
    from airflow_kafka_stream.runtime.kafka_sink import PAUSE_ENV, PAUSE_FILE_ENV

    sources = [create_topic(kafka_bootstrap, unique(f"eos-totals-in{n}"), PARTITIONS) for n in (1, 2)]
    output = create_topic(kafka_bootstrap, unique("eos-totals-out"), PARTITIONS)
    group, pause_file = unique("eos-totals"), tmp_path / "paused"
    feeds = [NumberedFeed(kafka_bootstrap, topic) for topic in sources]
    for feed in feeds:
        feed.start()

    def run(point: str | None) -> Pipeline:
        env = {**os.environ, PAUSE_ENV: point, PAUSE_FILE_ENV: str(pause_file)} if point else None
        pipeline = Pipeline(tmp_path, kafka_bootstrap, sources[0], group, "--topic", sources[1], "--output-topic",
                            output, "--max-offsets-per-trigger", "30", "--state-partitions", "2", env=env,
                            app=APPS / "totals_to_topic.py")
        pipelines.append(pipeline)
        return pipeline

    try:
        for point in ("writing", "committed"):
            pause_file.unlink(missing_ok=True)
            pipeline = run(point)
            pipeline.wait_for(pause_file.exists, f"the driver to stop at {point}", timeout=180)
            if point == "writing":
                assert open_partitions(kafka_bootstrap, output), "the crash hit inside a transaction"
            pipeline.kill()
        last = run(None)
        last.wait_for(lambda: ((last.status().get("kafka_sink") or {}).get("transactions") or {}).get("skipped", 0)
                      >= 1, "the re-run of the batch Kafka had committed to be skipped", timeout=180)
        sent = [feed.stop() for feed in feeds]
        last.wait_for(lambda: sum(int(o) for offsets in (last.status().get("last_offsets") or {}).values()
                                  for o in offsets.values()) >= sum(sent) and
                      set(last.status().get("last_offsets") or {}) == set(sources),
                      "the job to read everything sent to both topics", timeout=240)
        code, out, err = run_cli("stop", "--job-home", str(last.home), "--savepoint", "--json")
        assert code == 0 and json.loads(out)["state"] == "STOPPED", out + err
        assert last.wait_exit() == 0, last.log_tail()
    finally:
        for feed in feeds:
            feed.stop()

    rows = read_topic(kafka_bootstrap, output)
    assert open_partitions(kafka_bootstrap, output) == [], "a transaction is left open"
    # NumberedFeed numbers each topic's records from 0, keyed by number modulo KEYS
    assert_totals(rows, [range(topic_sent) for topic_sent in sent])
    sink = last.status()["kafka_sink"]
    assert sink["transactions"]["fenced"] == 0, sink
    assert json.loads((Path(last.home) / "job.json").read_text())["sink"]["kind"] == "kafka"

    # A drop-state restore of the stop's savepoint: a new generation, whose batch ids start again, counts from
    # zero what comes after the savepoint; the older generation's marker must not make the sink skip its batches.
    old_generation = last.status()["generation"]
    code, out, err = run_cli("restore", "--job-home", str(last.home), "--savepoint", "latest", "--drop-state",
                             "--json")
    restored = json.loads(out)
    assert code == 0 and restored["drop_state"] and restored["records_read_again"] == 0, out + err
    assert "kafka" in restored["sink"], restored["sink"]
    more = range(1000, 1000 + 5 * KEYS)
    for topic in sources:
        produce(kafka_bootstrap, topic, [(f"k{i % KEYS}", json.dumps({"id": f"m{i}", "key": f"k{i % KEYS}",
                                                                      "amount": i})) for i in more])
    after = run(None)
    after.wait_for(lambda: after.status().get("generation", old_generation) != old_generation and  # its own status
                   (after.status().get("records_this_run") or 0) >= 2 * len(more),
                   "the restored job to read what came after the savepoint", timeout=240)
    code, out, err = run_cli("stop", "--job-home", str(after.home), "--json")
    assert code == 0, out + err
    ends = {p: max(row["offset"] for row in rows if row["partition"] == p) for p in {row["partition"] for row in rows}}
    assert_totals([row for row in read_topic(kafka_bootstrap, output) if row["offset"] > ends.get(row["partition"], -1)],
                  [more, more])
    assert open_partitions(kafka_bootstrap, output) == []


def assert_totals(rows: list[dict], numbers_per_topic: list[range]) -> None:
    """Each key's totals in ``rows`` count up one batch at a time to its count and sum over the numbers each
    topic was sent (the amount of a record is its number)."""
    for key in range(KEYS):
        mine = [row for row in rows if row["key"] == f"k{key}"]
        assert mine, f"k{key}: no total written"
        counts = [row["events"] for row in mine]
        assert counts == sorted(set(counts)), f"k{key}: a total written twice, or built on lost state: {counts}"
        numbers = [i for sent in numbers_per_topic for i in sent if i % KEYS == key]
        assert (counts[-1], mine[-1]["amount"]) == (len(numbers), sum(numbers)), key
