"""Text the CLI prints for the operations' results (the Airflow layer logs and pushes their dicts instead)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_kafka_stream.checkpoint.reader import CheckpointPosition
from airflow_kafka_stream.ops.results import (
    JobStatus,
    RepairResult,
    ResetOutcome,
    RestoreResult,
    SavepointInfo,
    StopResult,
)
from airflow_kafka_stream.storage.status import FAILED, FINAL_STATES

#: An operation's setting -> the CLI option that gives it, added to a refusal that names the setting.
OPTION_OF_SETTING = {
    "job_home": "--job-home",
    "checkpoint": "--checkpoint",
    "bootstrap_servers": "--bootstrap-server",
    "group": "--group",
    "timeout": "--timeout",
    "on_timeout": "--on-timeout",
    "savepoint_id": "the savepoint id (restore: --savepoint)",
    "keep_last": "--keep-last",
    "max_age": "--keep-within",
    "scope": "--topic",
    "timezone": "--timezone",
    "export": "--export",
    "sink_kind": "--sink-kind",
    "sink_path": "--sink-path",
    "allow_sink_batch_log": "--allow-sink-batch-log",
    "drop_state": "--drop-state",
    "app_version": "--app-version",
    "value": "the strategy's value (e.g. --to-offset, --from-file)",
    "strategy": "a strategy option (--to-current, --to-offset, --to-datetime, ...)",
    "strict": "--strict",
    "command_config": "--command-config",
    "storage_options": "--storage-options",
    "stall_threshold": "--stall-threshold",
}


def refusal_text(message: str, settings: str | Sequence[str] | None) -> str:
    """A refusal as the CLI prints it: the operation's message, plus the option of each setting it names."""
    names = (settings,) if isinstance(settings, str) else tuple(settings or ())
    options = [f"{name}: {OPTION_OF_SETTING[name]}" for name in names if name in OPTION_OF_SETTING]
    return f"{message} [{'; '.join(options)}]" if options else message


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
    lines.append("")
    lines.append(("SOURCE  " if several else "") + f"{'TOPIC':<30} {'PARTITION':>9} {'NEXT OFFSET':>12}")
    for index, line in kafka.items():
        for topic, parts in line.items():
            for part, off in parts.items():
                lines.append((f"{index:<6}  " if several else "") + f"{topic:<30} {part:>9} {off:>12}")
    others = [str(i) for i in range(len(d["sources"])) if str(i) not in kafka]
    if others:
        lines.append(f"source(s) {', '.join(others)} are not Kafka sources; resets carry them unchanged")
    return "\n".join(lines)


def repair_text(result: RepairResult) -> str:
    done = f"interrupted reset {result.interrupted_reset}" if result.interrupted_reset else "nothing to repair"
    abandoned = (f"; abandoned generations (never completed, safe to delete): {result.abandoned_generations}"
                 if result.abandoned_generations else "")
    return f"{result.checkpoint}: {done}{abandoned}"


def stop_text(result: StopResult) -> str:
    state = result.state
    if result.killed:
        head = f"job {result.job_home}: did not drain in time, stopped at once (state {state})"
    elif result.was_running:
        head = f"job {result.job_home}: stopped (state {state})"
    elif state in FINAL_STATES:
        head = f"job {result.job_home}: was not running (state {state})"
    else:
        head = (f"job {result.job_home}: was not running, but its last status says {state} with a "
                "stale heartbeat: the driver probably died; check its log before restoring or resetting")
    lines = [head, f"last committed batch: {result.batch_id}", f"offsets: {result.offsets}"]
    if result.note:
        lines.append(f"note: {result.note}")
    if state == FAILED and result.error:
        lines.append(f"error: {result.error}")
    if result.savepoint is not None:
        made = result.savepoint
        lines.append(f"savepoint: {made.id}" + (f" ({made.note})" if made.note else ""))
    return "\n".join(lines)


def restore_text(result: RestoreResult) -> str:
    sp = result.savepoint
    how = ("fresh checkpoint seeded with the savepoint's offsets (operator state dropped)" if result.drop_state
           else f"copy of the savepoint; Spark resumes after batch {sp.batch_id}")
    return (f"restored savepoint {sp.id} into checkpoint generation {result.generation}:\n"
            f"  {result.checkpoint}\n  {how}\n  offsets: {sp.offsets}\n  sink: {result.sink}\n"
            "Start the job to continue from there.")


def reset_outcome_text(outcome: ResetOutcome) -> str:
    where = (f"new checkpoint generation {outcome.generation} ({outcome.checkpoint}), operator state dropped"
             if outcome.generation is not None else f"checkpoint batch {outcome.batch_id} appended")
    lines = [outcome.plan.to_table(), "", f"reset executed: {where}"]
    if len(outcome.sources) > 1:
        lines += [f"  Kafka source {index}: {line}" for index, line in outcome.sources.items()]
    group = outcome.group
    lines += [f"sink: {outcome.sink}",
              f"group: {'moved' if group.moved else f'not moved ({group.reason})'}",
              "verified: checkpoint and group are at the targets" if outcome.verified
              else "VERIFICATION FAILED:\n  " + "\n  ".join(outcome.verification)]
    return "\n".join(lines)


def savepoint_table(rows: Sequence[SavepointInfo]) -> str:
    if not rows:
        return "(no savepoints)"
    head = f"{'ID':<34} {'CREATED':<26} {'BATCH':>6} {'APP VERSION':<14} STATE"
    body = [f"{r.id:<34} {r.created_at[:25]:<26} {r.batch_id:>6} {str(r.app_version)[:14]:<14} "
            f"{r.state_store_provider.rsplit('.', 1)[-1] if r.stateful and r.state_store_provider else '-'}"
            for r in rows]
    return "\n".join([head, *body])


def fields_text(data: dict[str, Any]) -> str:
    return "\n".join(f"{key:<22}{value}" for key, value in data.items())


def status_text(status: JobStatus) -> str:
    """What `status` prints: the job's state and, when it is not what it says, why."""
    if status.state is None:
        head = "NOT STARTED (no status yet)"
    elif status.driver_lost:
        head = (f"{status.state} but its driver is gone (heartbeat {_age(status.heartbeat_age_seconds)}): it died "
                "without saying so; check its log before restoring or resetting")
    else:
        head = f"{status.state}{' (running)' if status.running else ''}"
    commits = status.group_commits or {}
    lines = [
        f"job             {status.job} ({status.job_home})",
        f"state           {head}",
        f"version         {status.app_version or '-'}",
        f"heartbeat       {_age(status.heartbeat_age_seconds)}",
        f"generation      {status.generation if status.generation is not None else '-'}",
        f"last batch      {status.last_batch_id if status.last_batch_id is not None else '(none yet)'}",
        f"group           {status.group or '-'}"
        + (f" (committed batch {commits.get('committed_batch')}, {commits.get('failures', 0)} failed commits)"
           if commits else ""),
    ]
    if commits.get("consecutive_failures"):
        lines.append(f"GROUP COMMITS   failing: {commits['consecutive_failures']} in a row, last error "
                     f"{commits.get('last_error')}")
    if status.dead_letters:
        lines.append(f"dead letters    {status.dead_letters}")
    if status.read_placement:
        lines.append(f"reads batches   {status.read_placement.get('reason')}")
    if status.stop_requested_at and status.state in ("RUNNING", "DRAINING"):
        lines.append(f"stop requested  at {status.stop_requested_at}")
    if status.standby:
        lines.append(f"standby         version {status.standby['version']} {status.standby['state']} (pid "
                     f"{status.standby['pid']} on {status.standby['host']})")
    if status.error:
        lines.append(f"error           {status.error}")
    return "\n".join(lines)


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}s ago"
