"""A job as text: its status, a stop's result, the operation history and a released lock."""

from __future__ import annotations

from airflow_kafka_stream.core.job_state import FINAL_STATES, JobState
from airflow_kafka_stream.core.liveness import DEAD, GAVE_UP
from airflow_kafka_stream.core.status_document import TimeLag
from airflow_kafka_stream.ops.results import History, JobStatus, StopResult, UnlockResult

#: Partitions named on the status's time lag line (the most behind first).
TIME_LAG_PARTITIONS = 5


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
    if state == JobState.FAILED and result.error:
        lines.append(f"error: {result.error}")
    if result.savepoint is not None:
        made = result.savepoint
        lines.append(f"savepoint: {made.id}" + (f" ({made.note})" if made.note else ""))
    return "\n".join(lines)


def status_text(status: JobStatus) -> str:
    """What `status` prints: the job's state and, when it is not what it says, why."""
    if status.state is None:
        head = "NOT STARTED (no status yet)"
    elif status.state == GAVE_UP:
        head = (f"{GAVE_UP} (its last status says {status.recorded_state}): {status.state_reason}; nothing restarts "
                "it: check its log, then submit it again")
    elif status.state == DEAD:
        head = (f"{DEAD} (its last status says {status.recorded_state}, heartbeat "
                f"{_age(status.heartbeat_age_seconds)}): {status.state_reason}; it died without saying so, a "
                "watchdog or supervisor may restart it; check its log before restoring or resetting")
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
    if status.time_lag is not None:
        lines.append(f"time lag        {time_lag_text(status.time_lag)}")
    if status.dead_letters:
        lines.append(f"dead letters    {status.dead_letters}")
    if status.metrics and status.metrics.get("failing"):
        lines.append(f"METRICS         failing: {status.metrics.get('last_error')}")
    if status.read_placement:
        lines.append(f"reads batches   {status.read_placement.get('reason')}")
    if status.stop_requested_at and JobState.parse(status.recorded_state) in (JobState.RUNNING, JobState.DRAINING):
        lines.append(f"stop requested  at {status.stop_requested_at}")
    if status.standby:
        lines.append(standby_line(status.standby))
    if status.error:
        lines.append(f"error           {status.error}")
    return "\n".join(lines)


def time_lag_text(lag: TimeLag, shown: int = TIME_LAG_PARTITIONS) -> str:
    """``max 12.3 s (orders:0 12.3 s, orders:1 0.0 s); last batch 0.8 s after its newest record``."""
    worst = lag.worst()
    parts = ", ".join(f"{topic}:{partition} {seconds:.1f} s" for topic, partition, seconds in worst[:shown])
    if len(worst) > shown:
        parts += f", ... ({len(worst)} partitions)"
    text = f"max {lag.max_seconds:.1f} s" + (f" ({parts})" if parts else "")
    if lag.last_batch_delay_seconds is not None:
        text += f"; last batch {lag.last_batch_delay_seconds:.1f} s after its newest record"
    return text


def history_text(history: History) -> str:
    """One line per operation, oldest first: when, what, how it ended, who, and the error."""
    records = [entry.record for entry in history.entries]
    lines = [f"{r.get('started_at', '?')}  {r.get('operation', '?'):<18} {r.get('result', '?'):<8} {r.get('by', '')}"
             + (f"  {r['error']}" if r.get("error") else "") for r in records]
    return "\n".join(lines) or "(no operations recorded)"


def unlock_text(result: UnlockResult) -> str:
    return f"released lock {result.released}" if result.released else "the job home was not locked"


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}s ago"


def standby_line(standby: dict) -> str:
    """The job's standby in one line of ``status`` (``ops.inspect.shown_standby``): the hot standby or an upgrade's."""
    return f"{'hot standby' if standby.get('hot') else 'standby':<16}{standby_text(standby)}"


def standby_text(standby: dict) -> str:
    """What the job's standby is doing, in words (the job page's cell, ``status``'s line)."""
    if standby.get("state") == "NONE":
        return f"NONE: {standby.get('note')}"
    return (f"version {standby.get('version')} {standby.get('state')} (pid {standby.get('pid')} on "
            f"{standby.get('host')})" + (f": {standby['note']}" if standby.get("note") else ""))
