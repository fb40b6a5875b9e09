"""Verify's look at the Kafka sink's output topic: an open transaction is a finding only when the job is down."""

from __future__ import annotations

from dataclasses import replace

from airflow_kafka_stream.core.output_check import EXPIRY_GRACE_MS, Holder, OutputCheck


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


NOW = 1_800_000_000_000


def writer(partition: int = 0, **changes) -> Holder:
    """The job's writer holding ``partition`` in a transaction open for 5 s of its 60 s timeout."""
    return replace(Holder(partition, 7, 3, 120, "ak.job.out", "Ongoing", NOW - 5_000, 60_000), **changes)


def test_the_job_writer_holding_a_partition_while_the_job_is_down_is_named_with_its_age():
    found = OutputCheck("out", {0: (120, 130)}, job_running=False, transactional_id="ak.job.out",
                        holders=(writer(),), now_ms=NOW)
    assert found.problem and not found.hanging
    text = found.describe()
    assert "partition 0 from offset 120: the job's writer, producer 7 (epoch 3, transactional id ak.job.out)" in text
    assert "Ongoing for 5 s of its 60 s timeout" in text and "start the job" in text
    assert found.to_dict()["holders"][0] | {"started_ms": 0} == {
        "partition": 0, "producer_id": 7, "producer_epoch": 3, "start_offset": 120, "transactional_id": "ak.job.out",
        "state": "Ongoing", "started_ms": 0, "open_for_ms": 5_000, "timeout_ms": 60_000, "job_writer": True,
        "hanging": False}


def test_the_running_job_holding_its_own_batch_is_no_problem():
    found = OutputCheck("out", {0: (120, 130), 1: (5, 5)}, job_running=True, transactional_id="ak.job.out",
                        holders=(writer(),), now_ms=NOW)
    assert not found.problem
    assert "the running job's batch; held by partition 0 from offset 120: the job's writer" in found.describe()


def test_another_producers_transaction_unknown_to_its_coordinator_hangs_even_while_the_job_runs():
    stranger = Holder(1, 42, 0, 17)  # no coordinator lists producer 42: no commit or abort is coming
    found = OutputCheck("out", {0: (120, 130), 1: (17, 30)}, job_running=True, transactional_id="ak.job.out",
                        holders=(writer(), stranger), now_ms=NOW)
    assert found.problem and found.hanging == [stranger]
    text = found.describe()
    assert "PROBLEM" in text and "kafka-transactions.sh abort" in text
    assert ("partition 1 from offset 17: another producer, producer 42 (epoch 0, no known transactional id), "
            "unknown to any transaction coordinator - HANGING") in text
    assert [h["hanging"] for h in found.to_dict()["holders"]] == [False, True]


def test_a_transaction_open_well_past_its_timeout_hangs_but_one_just_past_it_does_not_yet():
    assert writer(started_ms=NOW - 60_000 - EXPIRY_GRACE_MS - 1).hanging(NOW)
    assert not writer(started_ms=NOW - 61_000).hanging(NOW), "the coordinator aborts expired ones on its next check"
    assert writer(state="not open here (its coordinator has Empty for producer 7)").hanging(NOW)
    assert not writer(state="PrepareCommit").hanging(NOW)


def test_a_holder_that_could_not_be_asked_leaves_the_finding_standing_and_says_why():
    found = OutputCheck("out", {0: (10, 13)}, job_running=False, transactional_id="ak.job.out",
                        unanswered="Kafka's Java client is not installed")
    assert found.problem and found.holders is None
    assert "who holds it could not be asked (Kafka's Java client is not installed)" in found.describe()
    assert found.to_dict()["holders_unanswered"] == "Kafka's Java client is not installed"


def test_a_holder_whose_transaction_ended_between_the_requests_is_not_kept_as_hanging():
    ended = writer(state="not open here (its coordinator has CompleteCommit for producer 7)")
    stuck = Holder(1, 42, 0, 17)
    found = OutputCheck("out", {0: (120, 130), 1: (17, 30)}, job_running=True, transactional_id="ak.job.out",
                        holders=(ended, stuck), now_ms=NOW)
    assert found.hanging == [ended, stuck]
    again = found.looked_again({0: (131, 131), 1: (17, 31)})  # partition 0's batch committed; 1 is still pinned
    assert again.hanging == [stuck] and again.open_partitions == [1] and again.problem
    assert not found.looked_again({0: (131, 131), 1: (31, 31)}).problem
