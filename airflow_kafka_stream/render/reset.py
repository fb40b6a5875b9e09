"""Reset plans and executed resets as text."""

from __future__ import annotations

from airflow_kafka_stream.core.reset_plan import ResetPlan
from airflow_kafka_stream.ops.results import ResetOutcome, ResetRun
from airflow_kafka_stream.render.table import Column, dash, table

PLAN_COLUMNS = (Column("TOPIC"), Column("PARTITION"), Column("CHECKPOINT"), Column("GROUP"), Column("LOW"),
                Column("HIGH"), Column("REQUESTED"), Column("NEW-OFFSET"), Column("NOTE", free=True))


def plan_text(plan: ResetPlan) -> str:
    """One row per partition (checkpoint, group, watermarks, requested and new offset), then a summary."""
    rows = [
        (
            r.partition.topic,
            r.partition.partition,
            dash(r.checkpoint_offset),
            dash(r.group_offset),
            dash(r.low),
            dash(r.high),
            dash(r.requested) if r.in_scope else "-",
            dash(r.target) if r.in_scope else dash(r.checkpoint_offset),
            r.warning or ("" if r.in_scope else "out of scope: unchanged"),
        )
        for r in plan.rows
    ]
    changed = sum(1 for r in plan.rows if r.in_scope and r.target != r.checkpoint_offset)
    again = plan.read_again()
    summary = (f"reset {plan.strategy.description}; scope: {plan.scope.describe()}; "
               f"{changed} partition(s) change, {len(plan.warnings)} warning(s)"
               + (f"; {again} record(s) are read again (a Kafka sink writes them again unless it skips replays)"
                  if again else ""))
    return "\n".join([*table(PLAN_COLUMNS, rows), summary])


def reset_outcome_text(outcome: ResetOutcome) -> str:
    """The plan, where the checkpoint now stands, whether the group moved, and the verification."""
    where = (f"new checkpoint generation {outcome.generation} ({outcome.checkpoint}), operator state dropped"
             if outcome.generation is not None else f"checkpoint batch {outcome.batch_id} appended")
    lines = [plan_text(outcome.plan), "", f"reset executed: {where}"]
    if len(outcome.sources) > 1:
        lines += [f"  Kafka source {index}: {line}" for index, line in outcome.sources.items()]
    group = outcome.group
    lines += [f"sink: {outcome.sink}",
              f"group: {'moved' if group.moved else f'not moved ({group.reason})'}",
              "verified: checkpoint and group are at the targets" if outcome.verified
              else "VERIFICATION FAILED:\n  " + "\n  ".join(outcome.verification)]
    return "\n".join(lines)


def reset_run_text(run: ResetRun) -> str:
    """A dry run's plan, or an executed reset's outcome."""
    return plan_text(run.plan) if run.outcome is None else reset_outcome_text(run.outcome)
