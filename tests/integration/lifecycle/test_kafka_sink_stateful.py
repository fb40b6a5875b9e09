"""The transactional Kafka sink under a job of a user's own: running totals per key over two topics (a stateful
aggregation, ``tests/apps/totals_to_topic.py``), killed with ``kill -9`` inside a batch's transaction and again
after the batch's Kafka commit but before Spark's.

The second crash is the one a stateful query makes hard: Spark runs the batch again on restart, the sink finds it
committed and writes nothing, and the batch's state must still be the state the next batch builds on. The output
tells: each batch writes the totals of the keys it changed, so a key's records count up, one written twice (or a
total computed from lost state) breaks the count, and the last one is the key's total over both topics.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.airflow.test_airflow_upgrade import APPS
from tests.integration.lifecycle.test_exactly_once import Pipeline, pipelines  # noqa: F401 - a fixture
from tests.integration.lifecycle.test_kafka_sink import KEYS, NumberedFeed, open_partitions, read_topic
from tests.kafka_utils import create_topic, unique

pytestmark = pytest.mark.integration

PARTITIONS = 2


def test_running_totals_over_two_topics_survive_kill_9_inside_and_after_the_transaction(kafka_bootstrap, tmp_path,
                                                                                        pipelines):  # noqa: F811
    from airflow_kafka_stream.runtime.kafka_sink import PAUSE_ENV, PAUSE_FILE_ENV

    sources = [create_topic(kafka_bootstrap, unique(f"eos-totals-in{n}"), PARTITIONS) for n in (1, 2)]
    output = create_topic(kafka_bootstrap, unique("eos-totals-out"), PARTITIONS)
    group, pause_file = unique("eos-totals"), tmp_path / "paused"
    feeds = [NumberedFeed(kafka_bootstrap, topic) for topic in sources]
    for feed in feeds:
        feed.start()

    def run(point: str | None) -> Pipeline:
        import os

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
        wanted = {topic: {str(p): None for p in range(PARTITIONS)} for topic in sources}
        last.wait_for(lambda: sum(int(o) for offsets in (last.status().get("last_offsets") or {}).values()
                                  for o in offsets.values()) >= sum(sent) and
                      set(last.status().get("last_offsets") or {}) == set(wanted),
                      "the job to read everything sent to both topics", timeout=240)
        last.request_stop()
        assert last.wait_exit() == 0, last.log_tail()
    finally:
        for feed in feeds:
            feed.stop()

    rows = read_topic(kafka_bootstrap, output)
    assert open_partitions(kafka_bootstrap, output) == [], "a transaction is left open"
    for key in range(KEYS):
        counts = [row["events"] for row in rows if row["key"] == f"k{key}"]
        assert counts == sorted(set(counts)), f"k{key}: a total written twice, or built on lost state: {counts}"
        # NumberedFeed numbers each topic's records from 0, keyed by number modulo KEYS
        numbers = [i for topic_sent in sent for i in range(topic_sent) if i % KEYS == key]
        assert counts[-1] == len(numbers), (key, counts[-1], len(numbers))
        assert [row["amount"] for row in rows if row["key"] == f"k{key}"][-1] == sum(numbers)
    sink = last.status()["kafka_sink"]
    assert sink["transactions"]["fenced"] == 0, sink
    assert json.loads((Path(last.home) / "job.json").read_text())["sink"]["kind"] == "kafka"
