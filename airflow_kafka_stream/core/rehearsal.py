"""An upgrade rehearsal's verdict, and what a rehearsal's failure means, in words a user acts on.

A standby rehearses the new version's whole query on a private copy of the running job's checkpoint
before the upgrade asks the old version to stop (``runtime/rehearsal.py``). Spark itself checks the
state there: a changed key or value schema, or added, removed or changed stateful operators, fail the
first batch with an error class this module knows. A failure that is about the state is retried
without it (from the copy's offsets alone): if that runs, the verdict is ``needs drop_state``.

Verdicts:

* ``compatible``: the new query loaded the job's state and ran on real records;
* ``needs drop_state``: the state is incompatible, the query runs from offsets alone;
* ``fails``: the new version fails even without state (its code, its sink), with the reason;
* ``timed out``: the rehearsal outlived its time limit; never taken for compatible;
* ``not rehearsed``: nothing could be rehearsed (the job has no committed batch), with why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from airflow_kafka_stream.core.offsets import PartitionOffsets, TopicPartition


class Verdict(StrEnum):
    COMPATIBLE = "compatible"
    NEEDS_DROP_STATE = "needs drop_state"
    FAILS = "fails"
    TIMED_OUT = "timed out"
    NOT_REHEARSED = "not rehearsed"


class FailureKind(StrEnum):
    STATE = "state"  # the job's state does not fit the new query
    RECORD = "record"  # the new code raised on a record
    SINK = "sink"  # the query could not start (its sink, its plan)
    OTHER = "other"


#: Spark error classes that say the checkpoint's state does not fit the query.
STATE_ERROR_CLASSES = (
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
    "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION",
    "STATE_STORE_INVALID_CONFIG_AFTER_RESTART",
    "STATE_STORE_PROVIDER_DOES_NOT_SUPPORT_FINE_GRAINED_STATE_REPLAY",
    "CANNOT_LOAD_STATE_STORE",
    "STATE_SCHEMA_",
)


@dataclass(frozen=True)
class RehearsalResult:
    """What one rehearsal found: the verdict, why, and what it ran."""

    verdict: Verdict
    reason: str
    seconds: float = 0.0
    batches: int = 0
    records: int = 0
    with_state: bool = True
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": str(self.verdict), "reason": self.reason, "seconds": round(self.seconds, 3),
                "batches": self.batches, "records": self.records, "with_state": self.with_state, **self.details}

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> RehearsalResult | None:
        if not data or "verdict" not in data:
            return None
        extra = {k: v for k, v in data.items() if k not in ("verdict", "reason", "seconds", "batches", "records",
                                                             "with_state")}
        return cls(Verdict(data["verdict"]), str(data.get("reason") or ""), float(data.get("seconds") or 0),
                   int(data.get("batches") or 0), int(data.get("records") or 0), bool(data.get("with_state", True)),
                   extra)

    def acceptable(self, drop_state: bool) -> bool:
        """Whether an upgrade (with or without ``drop_state``) may go on to stop the old version."""
        return lets_upgrade_go_on(self.verdict, drop_state)


def lets_upgrade_go_on(verdict: Verdict | str, drop_state: bool) -> bool:
    """Whether an upgrade (with or without ``drop_state``) may go on to stop the old version after this verdict."""
    verdict = Verdict(verdict)
    return verdict in (Verdict.COMPATIBLE, Verdict.NOT_REHEARSED) or (
        verdict is Verdict.NEEDS_DROP_STATE and drop_state)


def failure_kind(error: str, started: bool) -> FailureKind:
    """What a rehearsal's error is about. ``started``: whether the query had started when it failed."""
    if any(name in error for name in STATE_ERROR_CLASSES):
        return FailureKind.STATE
    if not started:
        return FailureKind.SINK
    if "PythonException" in error or "Traceback (most recent call last)" in error or "PYTHON_" in error:
        return FailureKind.RECORD
    return FailureKind.OTHER


_SCHEMA = re.compile(r"Existing (key|value)_schema=(StructType\(.*?\)\)?) and new \1_schema=(StructType\(.*?\)\)?)\.?\s*$",
                     re.MULTILINE)
_FIELD = re.compile(r"StructField\(([^,()]+),(\w+?)(?:Type)?(?:\([^)]*\))?,(?:true|false)\)")
_SPARK_TYPES = {"String": "string", "Long": "bigint", "Integer": "int", "Double": "double", "Float": "float",
                "Boolean": "boolean", "Short": "smallint", "Byte": "tinyint", "Timestamp": "timestamp",
                "Date": "date", "Binary": "binary", "Decimal": "decimal", "TimestampNTZ": "timestamp_ntz"}
_OPERATORS = re.compile(r"Stateful operators in the metadata: \[(.*?)\]; Stateful operators in current batch: \[(.*?)\]")
_OPERATOR = re.compile(r"OperatorId: (\d+) -> OperatorName: (\w+)")


def schema_text(struct: str, names: Sequence[str] = ()) -> str:
    """``StructType(StructField(user_id,LongType,true))`` as ``(user_id bigint)``. ``names``: the query's own name
    of each field, by position (see :func:`grouping_names`), shown beside a name Spark made up:
    ``(_groupingexpression bigint, the query's key)``."""
    fields, named = [], False
    for index, (name, kind) in enumerate(_FIELD.findall(struct)):
        given = names[index] if index < len(names) else ""
        named = named or bool(given and given != name)
        fields.append(f"{name} {_SPARK_TYPES.get(kind, kind.lower())}"
                      + (f", the query's {given}" if given and given != name else ""))
    if not fields:
        return struct
    return f"({('; ' if named else ', ').join(fields)})"  # "; " once a field has a comma of its own


_AGGREGATE = re.compile(r"^[\s+\-:!~*]*Aggregate \[(.*)\], \[(.*)\]\s*$", re.MULTILINE)
_OUTPUT_ALIAS = re.compile(r"^(.*) AS (.+?)#\d+[A-Z]?$")
_ATTRIBUTE = re.compile(r"^([^\s#()]+)#\d+[A-Z]?$")


def _top_level(text: str) -> list[str]:
    """``text`` split at the commas outside any brackets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    return [*parts, text[start:].strip()] if text.strip() else parts


def grouping_names(analyzed_plan: str) -> tuple[str, ...]:
    """The names a query gives the keys of its aggregation, in the order of its state's key schema (one per
    grouping expression, ``""`` where it gives none), read from the text of its analyzed plan; ``()`` unless the
    plan has exactly one aggregation.

    Spark stores a grouping expression that is not a plain column under a name it makes up
    (``_groupingexpression``, the same for every such key); the query's own name for it is the alias of the same
    expression among the aggregation's outputs (``groupBy(F.length("k").alias("key_length"))``).
    """
    found = _AGGREGATE.findall(analyzed_plan)
    if len(found) != 1:
        return ()
    grouping, outputs = (_top_level(part) for part in found[0])
    aliases: dict[str, str] = {}
    for output in outputs:
        alias = _OUTPUT_ALIAS.match(output)
        if alias:
            aliases.setdefault(alias.group(1), alias.group(2))
    names = []
    for expression in grouping:
        column = _ATTRIBUTE.match(expression)
        names.append(aliases.get(expression) or (column.group(1) if column else ""))
    return tuple(names)


def _operators(text: str) -> list[tuple[int, str]]:
    return [(int(op), name) for op, name in _OPERATOR.findall(text)]


def state_failure_reason(error: str, key_names: Sequence[str] = ()) -> str:
    """A state error as the user acts on it: which operator, what the new version expects, what the state holds.
    ``key_names``: the new query's names of its aggregation's keys (:func:`grouping_names`), shown beside the
    names Spark made up for them (the state's key is read by the new query's key of the same position)."""
    schema = _SCHEMA.search(error)
    if schema:
        part = schema.group(1)
        names = key_names if part == "key" else ()
        existing, new = schema_text(schema.group(2), names), schema_text(schema.group(3), names)
        return (f"the new version's stateful operator expects {part} schema {new} but the state holds {existing}: "
                "upgrade with drop_state, or keep the state's schema")
    operators = _OPERATORS.search(error)
    if operators:
        old, new = _operators(operators.group(1)), _operators(operators.group(2))
        listed = lambda ops: ", ".join(f"{op} {name}" for op, name in ops) or "none"  # noqa: E731
        if len(old) != len(new):
            return (f"the new version has {len(new)} stateful operator{'s' * (len(new) != 1)} ({listed(new)}), the "
                    f"checkpoint {len(old)} ({listed(old)}): upgrade with drop_state, or keep the operators")
        return (f"the new version's stateful operators ({listed(new)}) differ from the checkpoint's ({listed(old)}): "
                "upgrade with drop_state, or keep the operators")
    first = next((line for line in error.splitlines() if any(n in line for n in STATE_ERROR_CLASSES)), error)
    return f"the job's state does not fit the new version ({first.strip()[:400]}): upgrade with drop_state"


_PYTHON_ERROR = re.compile(r"^(\w*(?:Error|Exception)): (.*)$", re.MULTILINE)


def python_error(error: str) -> str:
    """The last Python exception line of a worker's traceback (``ValueError: bad amount``), else the first line."""
    found = [m for m in _PYTHON_ERROR.finditer(error)
             if m.group(1) not in ("PythonException", "StreamingQueryException", "Py4JJavaError", "SparkException")]
    if found:
        return f"{found[-1].group(1)}: {found[-1].group(2).strip()[:300]}"
    return error.strip().splitlines()[0][:400] if error.strip() else "no error text"


def spark_error_line(error: str) -> str:
    """The first line that names Spark's error class (``[DATA_SOURCE_NOT_FOUND] ...``), else the first line."""
    for line in error.splitlines():
        if re.search(r"\[[A-Z_.]+\]", line):
            return re.sub(r"^.*?(\[[A-Z_.]+\])", r"\1", line).strip()[:400]
    return error.strip().splitlines()[0][:400] if error.strip() else "no error text"


def stretch_end(end: PartitionOffsets, high: Mapping[TopicPartition, int], records: int) -> PartitionOffsets:
    """Where a rehearsal's bounded stretch of newer records ends: ``end`` advanced on every partition by an even
    share of ``records`` (at least one each), never past what the partition holds now (``high``, its next
    offset) and never back; a partition whose high offset is unknown keeps its end."""
    share = max(1, math.ceil(records / max(1, len(end))))
    return {tp: max(offset, min(offset + share, high.get(tp, offset))) for tp, offset in end.items()}


def streaming_source_count(logical_plan: str) -> int:
    """How many streaming sources a query's logical plan (its tree string) reads: one ``StreamingRelation``
    node each."""
    return len(re.findall(r"^[\s:+\-|~]*StreamingRelation", logical_plan, flags=re.MULTILINE))
