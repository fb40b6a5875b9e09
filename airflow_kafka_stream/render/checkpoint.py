"""A checkpoint as text: its position, what its state holds, an fsck report, a repair, and a verify result."""

from __future__ import annotations

from airflow_kafka_stream.checkpoint.reader import CheckpointPosition
from airflow_kafka_stream.core.checkpoint_fsck import FsckReport
from airflow_kafka_stream.core.state_metadata import CheckpointState, StateOperator
from airflow_kafka_stream.core.verify import VerifyResult
from airflow_kafka_stream.ops.results import RepairResult
from airflow_kafka_stream.render.table import Column, dash, table

#: ``kafka-consumer-groups.sh --describe``'s spirit: offsets first, the status and why last.
VERIFY_COLUMNS = (Column("TOPIC"), Column("PARTITION"), Column("CHECKPOINT"), Column("GROUP"), Column("LOW"),
                  Column("HIGH"), Column("LAG"), Column("STATUS"), Column("DETAIL", free=True))
POSITION_COLUMNS = (Column("TOPIC", width=30), Column("PARTITION", ">", 9), Column("NEXT OFFSET", ">", 12))


def position_text(pos: CheckpointPosition) -> str:
    d = pos.to_dict()
    lines = [
        f"checkpoint      {d['checkpoint']}",
        f"query id        {d['query_id']}",
        f"last committed  batch {d['batch_id'] if d['batch_id'] is not None else '(none yet)'}"
        + (f" at {d['batch_time']}" if d["batch_time"] else ""),
        f"watermark       {d['batch_watermark_ms']}",
        f"state           {'stateful, ' + str(d['state_store_provider']) if d['stateful'] else 'stateless'}",
    ]
    if d["in_flight"]:
        lines.append(f"IN FLIGHT       batch {d['in_flight']['batch_id']} (planned, not committed: Spark re-runs it)")
    if d["interrupted_append"] is not None:
        lines.append(f"INTERRUPTED     offset append of batch {d['interrupted_append']}: run `airflow-kafka-stream "
                     "checkpoint repair` (the next reset or job start does it too)")
    if pos.offsets is None:
        return "\n".join(lines)
    kafka = d["kafka_sources"]
    if not kafka:
        lines += ["", f"no Kafka source: none of the {len(d['sources'])} source line(s) of batch {d['batch_id']} "
                      "holds Kafka offsets (a query over another source, e.g. rate); verify and reset do not apply"]
        return "\n".join(lines)
    several = len(d["sources"]) > 1
    # The source column is followed by two spaces, the others by one.
    columns = ((Column("SOURCE", width=7),) if several else ()) + POSITION_COLUMNS
    rows = [((index,) if several else ()) + (topic, part, off)
            for index, line in kafka.items() for topic, parts in line.items() for part, off in parts.items()]
    lines += ["", *table(columns, rows, sep=" ")]
    others = [str(i) for i in range(len(d["sources"])) if str(i) not in kafka]
    if others:
        lines.append(f"source(s) {', '.join(others)} are not Kafka sources; resets carry them unchanged")
    return "\n".join(lines)


def state_text(state: CheckpointState) -> str:
    """Each stateful operator: id and name, the versions its files hold, and per store the partitions and the key
    and value schema (per state variable for transformWithState); problems are said where they are."""
    batch = state.batch_id if state.batch_id is not None else "(none yet)"
    lines = [f"checkpoint      {state.checkpoint}", f"last committed  batch {batch}"]
    if state.note:
        return "\n".join([*lines, state.note])
    if not state.stateful:
        return "\n".join([*lines, "stateless: no state/ directory"])
    count = len(state.operators)
    lines.append(f"state           {count} stateful operator{'' if count == 1 else 's'}")
    for op in state.operators:
        lines += ["", *operator_lines(op)]
    return "\n".join(lines)


def operator_lines(op: StateOperator) -> list[str]:
    """One operator as ``checkpoint state`` prints it."""
    meta = f" (operator metadata v{op.metadata_version})" if op.metadata_version else ""
    lines = [f"operator {op.operator_id}  {op.name or '(name unknown)'}{meta}"]
    if op.batch_range is not None:
        first, last = op.batch_range
        lines.append(f"  versions {op.first_version}..{op.last_version} (the state after batches {first}..{last})")
    else:
        lines.append("  versions none present")
    lines += [f"  PROBLEM {problem}" for problem in op.problems]
    for store in op.stores:
        parts = f", {store.partitions} partitions" if store.partitions is not None else ""
        lines.append(f"  store {store.name}{parts}")
        if store.problem:
            lines.append(f"    PROBLEM {store.problem}")
        single = len(store.families) == 1 and store.families[0].name == "default"
        for family in store.families:
            data = family.to_dict()
            if single:
                lines += [f"    key    {data['key_schema']}", f"    value  {data['value_schema']}"]
            else:
                kind = "internal" if family.internal else "state variable"
                lines.append(f"    {kind} {family.name}: key {data['key_schema']}, value {data['value_schema']}")
    return lines


def fsck_text(report: FsckReport) -> str:
    status = "OK" if report.ok else f"{len(report.errors)} error(s)"
    return "\n".join([f"fsck {report.url}: {status}", *(str(finding) for finding in report.findings)])


def repair_text(result: RepairResult) -> str:
    done = f"interrupted reset {result.interrupted_reset}" if result.interrupted_reset else "nothing to repair"
    abandoned = (f"; abandoned generations (never completed, safe to delete): {result.abandoned_generations}"
                 if result.abandoned_generations else "")
    return f"{result.checkpoint}: {done}{abandoned}"


def with_time_lag_column(result: VerifyResult, rows: list[tuple]) -> tuple[tuple[Column, ...], list[tuple]]:
    """The verify table's columns and rows, with a TIME LAG column after LAG when the time lag was measured."""
    seconds = result.time_lag_seconds
    if not seconds:
        return VERIFY_COLUMNS, rows
    at = [column.title for column in VERIFY_COLUMNS].index("LAG") + 1
    cells = [dash(None if seconds.get(v.partition) is None else f"{seconds[v.partition]:.1f}s")
             for v in result.partitions]
    return (VERIFY_COLUMNS[:at] + (Column("TIME LAG", ">"),) + VERIFY_COLUMNS[at:],
            [(*row[:at], cell, *row[at:]) for row, cell in zip(rows, cells, strict=True)])


def verify_text(result: VerifyResult) -> str:
    """The note first (when there is one), one row per partition, then the overall status."""
    rows = [
        (
            v.partition.topic,
            v.partition.partition,
            dash(v.observation.checkpoint_offset),
            dash(v.observation.group_offset),
            dash(v.observation.low),
            dash(v.observation.high),
            dash(v.observation.lag),
            v.status.value,
            v.detail,
        )
        for v in result.partitions
    ]
    columns, rows = with_time_lag_column(result, rows)
    summary = (
        f"overall: {result.status.value}; {len(result.problems())} of {len(result.partitions)} partitions "
        f"with problems; total lag {result.total_lag}"
    )
    return "\n".join([*([f"note: {result.note}"] if result.note else []), *table(columns, rows), summary,
                      *group_lines(result), *window_lines(result),
                      *([result.output.describe()] if result.output is not None else [])])


def group_lines(result: VerifyResult) -> list[str]:
    """The group's state and its members, one line each (the job never joins its group: a member is someone
    else consuming with its group id)."""
    found = result.group_description
    if found is None:
        return []
    head = f"group {found.group}: {found.state} ({found.protocol} protocol), {len(found.members)} member(s)"
    if not found.foreign_members:
        return [head]
    return [head + "; WARNING: these consume with the job's group id (the job itself never joins it); an offset "
            "reset or restore is refused while they do:",
            *(f"  {m.describe()}, member {m.member_id}, assigned {', '.join(map(str, m.assignment)) or 'nothing'}"
              for m in found.foreign_members)]


def window_lines(result: VerifyResult) -> list[str]:
    """Burrow's window rules: the window's status and rule, then one line per partition that is not OK."""
    window = result.window
    if window is None:
        return []
    since = f" since {window.since.isoformat()}" if window.since else ""
    head = (f"window: {window.status.value}" + (f" ({window.rule})" if window.rule else "")
            + f"; {window.looks} look(s){since}, window {int(window.window.total_seconds())}s"
            + ("; a warning, not a failure" if window.status.value == "WARN" else ""))
    return [head, *(f"  {f.partition} {f.status.value} {f.rule}: {f.detail}" for f in window.findings)]
