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

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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


def schema_text(struct: str) -> str:
    """``StructType(StructField(user_id,LongType,true))`` as ``(user_id bigint)``."""
    fields = [f"{name} {_SPARK_TYPES.get(kind, kind.lower())}" for name, kind in _FIELD.findall(struct)]
    return f"({', '.join(fields)})" if fields else struct


def _operators(text: str) -> list[tuple[int, str]]:
    return [(int(op), name) for op, name in _OPERATOR.findall(text)]


def state_failure_reason(error: str) -> str:
    """A state error as the user acts on it: which operator, what the new version expects, what the state holds."""
    schema = _SCHEMA.search(error)
    if schema:
        part, existing, new = schema.group(1), schema_text(schema.group(2)), schema_text(schema.group(3))
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
