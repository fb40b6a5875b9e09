"""Where batches are read (read_placement.py): each case says why it expects what it expects."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.source.read_placement import read_placement
from airflow_kafka_stream.source.source_options import parse_source_options

BASE = {"kafka.bootstrap.servers": "b:9092", "subscribe": "orders"}

CASES = [
    # id, options, C reader missing on the driver, mode, batch sizes read on the driver, sizes read by tasks, why
    ("default-auto", {}, None, "auto", [1, 300, 20_000], [0, 20_001, 2_000_000],
     "no readMode: small batches on the driver, large ones (and empty ones, which read nothing) by tasks"),
    ("auto-bounded-by-option", {"driverReadMaxRecords": "500"}, None, "auto", [500], [501],
     "the driver's share is the user's bound when given"),
    ("auto-with-max-offsets", {"maxOffsetsPerTrigger": "300"}, None, "auto", [300], [20_001],
     "maxOffsetsPerTrigger bounds the batch; the placement still follows the planned size"),
    ("explicit-driver", {"readMode": "driver", "maxOffsetsPerTrigger": "50000"}, None, "driver",
     [1, 50_000], [], "an explicit readMode=driver wins over the auto bound"),
    ("explicit-executors", {"readMode": "executors"}, None, "executors", [], [1, 300],
     "an explicit readMode=executors wins: every batch in tasks"),
    ("spread-by-min-partitions", {"minPartitions": "8"}, None, "executors", [], [1, 300],
     "minPartitions asks for parallel tasks: auto never turns it into a refused driver read"),
    ("spread-by-max-records", {"maxRecordsPerPartition": "100"}, None, "executors", [], [5],
     "maxRecordsPerPartition likewise"),
    ("no-c-reader-on-driver", {}, "extension not built", "executors", [], [5],
     "auto falls back to tasks rather than fail a read the driver cannot do fast"),
    ("no-c-reader-but-fallback-allowed", {"kafkaConsumer.allowPythonFallback": "true"}, "not built", "auto",
     [5], [20_001], "the user allowed reading in Python, so the driver may read"),
]


@pytest.mark.parametrize("options, missing, mode, driver_sizes, task_sizes, why",
                         [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_placement(options, missing, mode, driver_sizes, task_sizes, why):
    placement = read_placement(parse_source_options({**BASE, **options}), missing)
    assert placement.mode == mode, why
    assert all(placement.on_driver(n) for n in driver_sizes), why
    assert not any(placement.on_driver(n) for n in task_sizes), why
    assert placement.reason.startswith("readMode="), "the reason names the option a user types"


def test_the_reason_says_the_rule_and_the_fallbacks_say_why():
    auto = read_placement(parse_source_options(BASE))
    assert auto.reason == ("readMode=auto: batches of up to 20000 records (and 64 MiB) are read on the driver "
                           "while Spark plans them, larger ones by Spark tasks")
    assert auto.to_dict() == {"mode": "auto", "reason": auto.reason, "driver_max_records": 20_000,
                              "driver_max_bytes": 64 * 1024 * 1024}
    assert auto.byte_budget == 64 * 1024 * 1024
    spread = read_placement(parse_source_options({**BASE, "minPartitions": "4"}))
    assert "minPartitions" in spread.reason and spread.to_dict() == {"mode": "executors", "reason": spread.reason}
    assert "extension not built" in read_placement(parse_source_options(BASE), "extension not built").reason
    assert read_placement(parse_source_options({**BASE, "readMode": "driver", "maxOffsetsPerTrigger": "5"})
                          ).byte_budget is None, "readMode=driver reads every batch whole, as it always did"
