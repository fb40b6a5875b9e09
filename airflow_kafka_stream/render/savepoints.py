"""Savepoints as text: a list, a manifest's fields, a restore and a prune."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_kafka_stream.ops.results import PruneResult, RestoreResult, SavepointInfo
from airflow_kafka_stream.render.table import Column, table

SAVEPOINT_COLUMNS = (Column("ID", width=34), Column("CREATED", width=26), Column("BATCH", ">", 6),
                     Column("TAKEN", width=7), Column("APP VERSION", width=14), Column("STATE", free=True))


def savepoint_table(rows: Sequence[SavepointInfo]) -> str:
    if not rows:
        return "(no savepoints)"
    cells = [(r.id, r.created_at[:25], r.batch_id, _taken(r), str(r.app_version)[:14],
              r.state_store_provider.rsplit(".", 1)[-1] if r.stateful and r.state_store_provider else "-")
             for r in rows]
    return "\n".join(table(SAVEPOINT_COLUMNS, cells, sep=" "))


def _taken(info: SavepointInfo) -> str:
    """How a savepoint was taken: ``live`` from the running job, ``stopped`` after a stop."""
    return "live" if info.live else "stopped"


def fields_text(data: dict[str, Any]) -> str:
    return "\n".join(f"{key:<22}{value}" for key, value in data.items())


def created_text(made: SavepointInfo) -> str:
    how = "live savepoint (the job kept running)" if made.live else "savepoint"
    return f"created {how} {made.id} at batch {made.batch_id}: offsets {made.offsets}"


def validated_text(checked: SavepointInfo) -> str:
    return f"savepoint {checked.id}: all {checked.files} checksums match"


def deleted_text(savepoint_id: str) -> str:
    return f"deleted savepoint {savepoint_id}"


def prune_text(pruned: PruneResult) -> str:
    text = ("deleted " + ", ".join(pruned.deleted)) if pruned.deleted else "nothing to prune"
    if pruned.pinned:
        text += f" (kept while an upgrade may roll back to them: {', '.join(pruned.pinned)})"
    return text


def restore_text(result: RestoreResult) -> str:
    sp = result.savepoint
    how = ("fresh checkpoint seeded with the savepoint's offsets (operator state dropped)" if result.drop_state
           else f"copy of the savepoint; Spark resumes after batch {sp.batch_id}")
    return (f"restored savepoint {sp.id} into checkpoint generation {result.generation}:\n"
            f"  {result.checkpoint}\n  {how}\n  offsets: {sp.offsets}\n  sink: {result.sink}\n"
            + (f"  {result.records_read_again} record(s) are read again (a Kafka sink writes them again "
               "unless it skips replays: see the sink line)\n" if result.records_read_again else "")
            + "Start the job to continue from there.")
