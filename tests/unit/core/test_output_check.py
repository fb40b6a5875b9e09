"""Verify's look at the Kafka sink's output topic: an open transaction is a finding only when the job is down."""

from __future__ import annotations

from airflow_kafka_stream.core.output_check import OutputCheck


def test_no_open_transaction_is_said_and_is_no_problem():
    found = OutputCheck("out", {0: (10, 10), 1: (4, 4)}, job_running=False)
    assert found.open_partitions == [] and not found.problem
    assert "no open transaction" in found.describe()


def test_an_open_transaction_of_a_running_job_is_its_batch():
    found = OutputCheck("out", {0: (10, 13), 1: (4, 4)}, job_running=True)
    assert found.open_partitions == [0] and not found.problem
    assert "as while the running job writes its batch" in found.describe()


def test_an_open_transaction_while_the_job_is_down_stalls_readers_and_says_what_to_do():
    found = OutputCheck("out", {0: (10, 13), 1: (2, 4)}, job_running=False, transactional_id="ak.job.out")
    assert found.problem and found.open_partitions == [0, 1]
    text = found.describe()
    assert "PROBLEM" in text and "0 (3 offsets), 1 (2 offsets)" in text and "start the job" in text
    assert "kafka-transactions.sh describe --transactional-id ak.job.out" in text, "the tool that says whose it is"
    assert found.to_dict()["transactional_id"] == "ak.job.out"
    assert found.to_dict()["partitions"]["1"] == {"last_stable_offset": 2, "high_watermark": 4}
