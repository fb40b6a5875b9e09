"""The rehearsal's pure rules: what Spark's errors mean for an upgrade, and the query's binding file."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from airflow_kafka_stream.core.offsets import TopicPartition
from airflow_kafka_stream.core.rehearsal import (
    FailureKind,
    RehearsalResult,
    Verdict,
    failure_kind,
    grouping_names,
    python_error,
    schema_text,
    spark_error_line,
    state_failure_reason,
)
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.source.binding import (
    answered,
    bound_options,
    write_binding,
    write_cancelled,
    write_waiting,
)
from airflow_kafka_stream.source.source_options import parse_source_options

# Spark 4.2's own messages, as a rehearsal received them (trimmed after the first lines).
KEY_CHANGED = """[STREAM_FAILED] Query [id = 3bd7a105, runId = 4a91468c] terminated with exception: \
[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] Provided key schema does not match existing state key schema.
Please check number and type of fields.
Existing key_schema=StructType(StructField(user_id,LongType,true)) and new \
key_schema=StructType(StructField(user_id,StringType,true)).
If you want to force running the query without schema validation, please set \
spark.sql.streaming.stateStore.stateSchemaCheck to false."""
VALUE_CHANGED = """[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE] Provided value schema does not match existing state value schema.
Existing value_schema=StructType(StructField(sum,DoubleType,true),StructField(count,LongType,false)) and new \
value_schema=StructType(StructField(sum,DoubleType,true))."""
OPERATOR_ADDED = """[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] Streaming stateful operator name does not \
match with the operator in state metadata.
Stateful operators in the metadata: [(OperatorId: 0 -> OperatorName: stateStoreSave)]; Stateful operators in current \
batch: [(OperatorId: 0 -> OperatorName: stateStoreSave), (OperatorId: 1 -> OperatorName: dedupe)]. SQLSTATE: 42K03"""
RAISED = """[STREAM_FAILED] Query terminated with exception: Job aborted due to stage failure: \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/apps/v2.py", line 30, in checked
    raise ValueError(f"amount {value} is not a valid amount")
ValueError: amount -1.0 is not a valid amount
"""
NO_SINK = """An error occurred while calling o216.start.
: org.apache.spark.SparkClassNotFoundException: [DATA_SOURCE_NOT_FOUND] Failed to find the data source: nosuchformat."""


def test_state_errors_are_told_in_the_words_a_user_acts_on():
    assert schema_text("StructType(StructField(user_id,LongType,true),StructField(n,IntegerType,false))") == (
        "(user_id bigint, n int)")
    assert state_failure_reason(KEY_CHANGED) == (
        "the new version's stateful operator expects key schema (user_id string) but the state holds "
        "(user_id bigint): upgrade with drop_state, or keep the state's schema")
    assert "expects value schema (sum double) but the state holds (sum double, count bigint)" in (
        state_failure_reason(VALUE_CHANGED))
    assert state_failure_reason(OPERATOR_ADDED) == (
        "the new version has 2 stateful operators (0 stateStoreSave, 1 dedupe), the checkpoint 1 (0 stateStoreSave): "
        "upgrade with drop_state, or keep the operators")


@pytest.mark.parametrize(("error", "started", "kind"), [
    (KEY_CHANGED, True, FailureKind.STATE), (OPERATOR_ADDED, True, FailureKind.STATE),
    (RAISED, True, FailureKind.RECORD), (NO_SINK, False, FailureKind.SINK), ("[INTERNAL_ERROR] boom", True,
                                                                              FailureKind.OTHER)])
def test_what_a_failure_is_about(error, started, kind):
    assert failure_kind(error, started) is kind


def test_the_exception_a_new_version_raised_and_sparks_error_class_are_quoted():
    assert python_error(RAISED) == "ValueError: amount -1.0 is not a valid amount"
    assert spark_error_line(NO_SINK).startswith("[DATA_SOURCE_NOT_FOUND] Failed to find the data source: nosuchformat")


def test_which_verdicts_let_an_upgrade_go_on_to_the_stop():
    result = lambda verdict: RehearsalResult(verdict, "why")  # noqa: E731
    assert result(Verdict.COMPATIBLE).acceptable(drop_state=False)
    assert not result(Verdict.NEEDS_DROP_STATE).acceptable(drop_state=False)
    assert result(Verdict.NEEDS_DROP_STATE).acceptable(drop_state=True)
    assert not result(Verdict.TIMED_OUT).acceptable(drop_state=True), "a rehearsal that timed out proves nothing"
    assert not result(Verdict.FAILS).acceptable(drop_state=True)
    again = RehearsalResult.of(RehearsalResult(Verdict.FAILS, "why", 1.5, 2, 30, False, {"failure": "record"}).to_dict())
    assert again == RehearsalResult(Verdict.FAILS, "why", 1.5, 2, 30, False, {"failure": "record"})


def test_a_binding_file_gives_each_start_its_options(tmp_path):
    path = str(tmp_path / "binding.json")
    defined = {"kafka.bootstrap.servers": "b:9092", "subscribe": "orders", "startingOffsets": "earliest",
               "bindingPath": path}
    write_binding(path, {**defined, "startingOffsets": '{"orders":{"0":5}}', "drainPath": "/scratch/control",
                         "rehearsalEndOffsets": '{"orders":{"0":9}}'})
    assert json.loads((tmp_path / "binding.json").read_text())["drainPath"] == "/scratch/control"
    parsed = parse_source_options(bound_options(defined))
    assert (parsed.starting.offsets, parsed.drain_path, parsed.end_offsets) == (
        {TopicPartition("orders", 0): 5}, "/scratch/control", {TopicPartition("orders", 0): 9})
    write_binding(path, {**defined, "drainPath": "/home/control"})  # the real run: no rehearsal bound
    parsed = parse_source_options(bound_options(defined))
    assert (parsed.starting.kind, parsed.drain_path, parsed.end_offsets) == ("earliest", "/home/control", None)


def test_a_missing_binding_file_is_refused_naming_who_writes_it(tmp_path):
    with pytest.raises(InvalidInputError, match="written by the job runtime before each start"):
        bound_options({"bindingPath": str(tmp_path / "gone.json")})


def test_a_query_started_ahead_waits_for_its_binding_and_warms_up_once_meanwhile(tmp_path):
    path = str(tmp_path / "binding.json")
    defined = {"kafka.bootstrap.servers": "b:9092", "subscribe": "orders", "bindingPath": path}
    write_waiting(path, 60)
    warmed: list[int] = []
    later = threading.Timer(0.3, lambda: write_binding(path, {**defined, "drainPath": "/home/control"}))
    later.start()
    began = time.monotonic()
    bound = bound_options(defined, while_waiting=lambda: warmed.append(1))
    assert time.monotonic() - began >= 0.25, "it returned before the binding was written"
    assert bound["drainPath"] == "/home/control" and warmed == [1]


def test_a_source_waiting_for_its_binding_answers_once_warm_and_a_new_wait_forgets_the_answer(tmp_path):
    """The standby reports READY only on this answer (runtime/takeover.py): it comes from the process that serves
    the source, after its warm-up, while it still waits; a later start ahead must answer again."""
    path = str(tmp_path / "binding.json")
    defined = {"subscribe": "orders", "bindingPath": path}
    write_waiting(path, 60)
    assert answered(path) is None, "no answer before the source came up"
    seen: list[dict | None] = []
    threading.Timer(0.3, lambda: (seen.append(answered(path)), write_binding(path, defined))).start()
    bound_options(defined, while_waiting=lambda: seen.append(answered(path)))
    assert seen[0] is None, "the warm-up comes first"
    assert seen[1] is not None and seen[1]["pid"] == os.getpid(), "answered while still waiting for the go"
    write_waiting(path, 60)
    assert answered(path) is None, "a new start ahead waits for its own answer"


def test_a_query_started_ahead_and_not_used_fails_before_reading(tmp_path):
    path = str(tmp_path / "binding.json")
    defined = {"subscribe": "orders", "bindingPath": path}
    write_waiting(path, 60)
    threading.Timer(0.1, lambda: write_cancelled(path)).start()
    with pytest.raises(InvalidInputError, match="started ahead of a standby's go and is not used"):
        bound_options(defined)
    write_waiting(path, 0.1)  # a go that never comes: the wait ends on its own
    with pytest.raises(InvalidInputError, match="did not come in time"):
        bound_options(defined)


def test_a_failing_warm_up_does_not_fail_the_start(tmp_path):
    path = str(tmp_path / "binding.json")
    defined = {"subscribe": "orders", "bindingPath": path}
    write_waiting(path, 60)
    threading.Timer(0.1, lambda: write_binding(path, {**defined, "startingOffsets": "latest"})).start()

    def broken() -> None:
        raise RuntimeError("no broker")

    assert bound_options(defined, while_waiting=broken)["startingOffsets"] == "latest"


# The example pipeline's totals grouped by a struct field it names "key", changed to a number (Spark 4.2's error
# and analyzed plan as a rehearsal got them, trimmed).
KEY_EXPRESSION_CHANGED = """[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] Provided key schema does not match existing state \
key schema.
Existing key_schema=StructType(StructField(_groupingexpression,StringType,true)) and new \
key_schema=StructType(StructField(_groupingexpression,LongType,true))."""
PLAN = """~Aggregate [cast(length(parsed#41.key) as bigint), date_trunc(minute, ts#7, Some(Etc/UTC)), region#9], \
[cast(length(parsed#41.key) as bigint) AS key#52L, date_trunc(minute, ts#7, Some(Etc/UTC)) AS minute#53, region#9, \
sum(parsed#41.amount) AS amount#54, count(1) AS events#55L]
+- ~Filter isnull(dead_letter_error#44)
   +- ~Project [from_json(StructType(StructField(key,StringType,true)), cast(value#1 as string)) AS parsed#41]
      +- ~StreamingRelationV2 kafka_stream, [key#0, value#1, ts#7, region#9]"""


@pytest.mark.parametrize(("plan", "names", "why"), [
    (PLAN, ("key", "minute", "region"), "1-expressions get their alias, a plain column its own name"),
    (PLAN.replace("~Aggregate", "+- Aggregate"), ("key", "minute", "region"), "2-a nested aggregation"),
    (PLAN + "\n" + PLAN.splitlines()[0], (), "3-two aggregations: which one failed is not known"),
    ("~Project [a#1]", (), "4-no aggregation"),
    ("~Aggregate [upper(k#1)], [count(1) AS n#2L]", ("",), "5-a key the query does not output has no name"),
])
def test_the_query_names_of_its_aggregations_keys_come_from_its_plan(plan, names, why):
    assert grouping_names(plan) == names, why


def test_a_key_spark_named_is_shown_with_the_querys_name_beside_it():
    names = grouping_names(PLAN)
    assert state_failure_reason(KEY_EXPRESSION_CHANGED, names) == (
        "the new version's stateful operator expects key schema (_groupingexpression bigint, the query's key) but "
        "the state holds (_groupingexpression string, the query's key): upgrade with drop_state, or keep the "
        "state's schema")
    assert "expects key schema (user_id string) but the state holds (user_id bigint)" in (
        state_failure_reason(KEY_CHANGED, ("user_id",))), "a name the query gave itself is not repeated"
    assert "(sum double; count bigint" not in state_failure_reason(VALUE_CHANGED, names), "only the key is named"
